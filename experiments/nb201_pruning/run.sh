#!/usr/bin/env bash
# Reproduce the experiment from the repository root: predictions of all 15,625 cells (once; resumes
# where it stopped), 120 searches (20 evaluation seeds, 200-219, none of them used to tune the policy
# x {NSGA-II, TPE, random} x {no pruning, dominated_throughput}), then the analysis, which first
# consolidates the run folders in runs/ (not committed) into results/trials.csv.gz.
set -euo pipefail
cd "$(dirname "$0")/../.."
python experiments/nb201_pruning/predict_all.py --workers 2
rm -rf experiments/nb201_pruning/runs
nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
    'seed=range(200,220)' prune=none,dominated_throughput sampler=nsga2,tpe,random
python experiments/nb201_pruning/analyze.py
