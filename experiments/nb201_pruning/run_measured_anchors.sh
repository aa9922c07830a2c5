#!/usr/bin/env bash
# The third version with the front's fast end trained first: as run_measured_v2.sh (evaluation seeds 600-619,
# 300 trials, pruned by prediction and scored by measurement), for the two adaptive samplers (NSGA-II, TPE),
# with `anchors=4` in both arms (the four cells of highest predicted throughput trained first); then the
# analysis into results/measured_anchors/. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf experiments/nb201_pruning/runs_measured_anchors
nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
    evaluator=table n_trials=300 'seed=range(600,620)' prune=none,dominated_throughput sampler=nsga2,tpe anchors=4 \
    hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=experiments/nb201_pruning/runs_measured_anchors
python experiments/nb201_pruning/analyze_measured.py --runs experiments/nb201_pruning/runs_measured_anchors \
    --out experiments/nb201_pruning/results/measured_anchors
