#!/usr/bin/env bash
# Reproduce the experiment from the repository root: predictions of all 15,625 cells (once; resumes
# where it stopped), 40 searches (10 seeds x {NSGA-II, random} x {no pruning, dominated_throughput}),
# 20 more for NSGA-II with pruned trials recorded as PRUNED or as infeasible, then the analysis, which
# first consolidates the run folders in runs/ (not committed) into results/trials.csv.gz.
set -euo pipefail
cd "$(dirname "$0")/../.."
python experiments/nb201_pruning/predict_all.py --workers 2
rm -rf experiments/nb201_pruning/runs
nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m \
    'seed=range(0,10)' prune=none,dominated_throughput sampler=nsga2,random
# NSGA-II with the pruned trials told to the sampler the other two ways (the default, pruned_as=auto,
# records them as predicted for NSGA-II; random search keeps them PRUNED).
nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m \
    'seed=range(0,10)' prune=dominated_throughput sampler=nsga2 pruned_as=pruned,infeasible \
    'hydra.sweep.subdir=${sampler.name}-${prune.name}-as_${pruned_as}/s${seed}'
python experiments/nb201_pruning/analyze.py
