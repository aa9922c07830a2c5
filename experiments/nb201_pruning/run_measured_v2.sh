#!/usr/bin/env bash
# The policy's third version (distinct cells, error quantile), prune by prediction and score by measurement:
# as run_measured.sh, on 20 fresh evaluation seeds (600-619) that neither the tuning (seeds 500-509,
# tuning/tune_measured.sh) nor any earlier run touched, 300 trials (the first 150 of each are the 150-trial
# search), {NSGA-II, TPE, random} x {no pruning, dominated_throughput with its shipped defaults}; then the
# analysis into results/measured_v2/. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf experiments/nb201_pruning/runs_measured_v2
nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
    evaluator=table n_trials=300 'seed=range(600,620)' prune=none,dominated_throughput sampler=nsga2,tpe,random \
    hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=experiments/nb201_pruning/runs_measured_v2
python experiments/nb201_pruning/analyze_measured.py --runs experiments/nb201_pruning/runs_measured_v2 \
    --out experiments/nb201_pruning/results/measured_v2
