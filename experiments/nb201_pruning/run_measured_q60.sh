#!/usr/bin/env bash
# The third version with a lower error allowance and a longer fast end: on fresh evaluation seeds 800-819
# (used by nothing before), 300 trials, NSGA-II and TPE, pruned by prediction and scored by measurement,
# `anchors=8` in both arms (the eight cells of highest predicted throughput trained first), and the pruned arm
# allowing the median-to-upper-quartile error `prune.error_quantile=0.6` (screened on the tuning seeds
# 500-509 by tuning/replay_measured.py: results/measured_v2/tuning/screen.csv); then the analysis into
# results/measured_q60/. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
R=experiments/nb201_pruning/runs_measured_q60
rm -rf $R
sweep() {
    nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
        evaluator=table n_trials=300 'seed=range(800,820)' sampler=nsga2,tpe anchors=8 \
        hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=$R "$@"
}
sweep prune=none
sweep prune=dominated_throughput prune.error_quantile=0.6
python experiments/nb201_pruning/analyze_measured.py --runs $R --out experiments/nb201_pruning/results/measured_q60
