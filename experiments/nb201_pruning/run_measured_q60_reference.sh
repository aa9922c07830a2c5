#!/usr/bin/env bash
# The reference for run_measured_q60.sh on the same evaluation seeds 800-819: the policy's defaults
# (`prune.error_quantile=0.75`) and `anchors=4` in both arms, as run_measured_anchors.sh ran on seeds 600-619;
# then the analysis into results/measured_q60_reference/. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
R=experiments/nb201_pruning/runs_measured_q60_reference
rm -rf $R
nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
    evaluator=table n_trials=300 'seed=range(800,820)' prune=none,dominated_throughput sampler=nsga2,tpe anchors=4 \
    hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=$R
python experiments/nb201_pruning/analyze_measured.py --runs $R --out experiments/nb201_pruning/results/measured_q60_reference
