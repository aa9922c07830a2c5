#!/usr/bin/env bash
# Prune by prediction, score by measurement: the experiment's searches with every trained candidate scored on
# the shipped H200 measurements of its cell (`evaluator=table`), 300 trials (the first 150 of each are the
# 150-trial search), 20 fresh seeds (400-419) x {NSGA-II, TPE, random} x {no pruning, dominated_throughput},
# then both scorings of each pair (measured and predicted throughput) side by side. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf experiments/nb201_pruning/runs_measured
nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
    evaluator=table n_trials=300 'seed=range(400,420)' prune=none,dominated_throughput sampler=nsga2,tpe,random \
    hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=experiments/nb201_pruning/runs_measured
python experiments/nb201_pruning/analyze_measured.py --runs experiments/nb201_pruning/runs_measured \
    --out experiments/nb201_pruning/results/measured
