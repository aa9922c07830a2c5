#!/usr/bin/env bash
# Tuning of the dominated_throughput policy for pruned NSGA-II (pruned_as=predicted, the default), run
# from the repository root. Every knob is given explicitly, so the runs do not depend on the defaults.
#   grid1:   seeds 0-9, NSGA-II, one knob at a time away from the old defaults (margin 0, band 0.05,
#            warmup 10, min_neighbours 3); their run is the experiment's sweep before min_neighbours became 2
#   grid2:   seeds 0-9, combinations around the best of grid1, and random search with it
#   working: seeds 100-109, NSGA-II, the policy's second version with its defaults (see the README)
#   confirm: seeds 10-19, unpruned NSGA-II and random search, and both pruned with the chosen setting
#            (min_neighbours 2) and the old one (min_neighbours 3)
# Unpruned NSGA-II and random search for seeds 0-9 come from the experiment's own searches,
# results/trials.csv.gz (they do not depend on the policy). Runs go to tuning/runs/ (not committed);
# then, for the CSVs in results/tuning/:
#   python experiments/nb201_pruning/tuning/summarize.py experiments/nb201_pruning/results/trials.csv.gz experiments/nb201_pruning/tuning/runs/grid --out grid
#   python experiments/nb201_pruning/tuning/summarize.py experiments/nb201_pruning/tuning/runs/confirm --out confirm
# (grid.csv was written before the experiment's searches were re-run with the new default, so its
# min_neighbours-3 rows are their pruned arms of that time, renamed with their knobs; summarising
# results/trials.csv.gz today gives the rows of the chosen setting, min_neighbours 2, under the arm
# names of the experiment.)
set -euo pipefail
cd "$(dirname "$0")/../../.."
T=experiments/nb201_pruning/tuning
KNOBS='${sampler.name}-${prune.name}_m${prune.margin}_b${prune.band}_w${prune.warmup_trials}_n${prune.min_neighbours}/s${seed}'
OLD='prune.margin=0.0 prune.band=0.05 prune.warmup_trials=10 prune.min_neighbours=3'
search() {  # search SWEEP_DIR OVERRIDES...: pruned searches (heartbeats off: the same trials, less storage traffic)
    local dir=$1; shift
    nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
        "hydra.sweep.dir=$dir" "hydra.sweep.subdir=$KNOBS" prune=dominated_throughput "$@"
}
unpruned() {  # unpruned SWEEP_DIR OVERRIDES...: prune=none has no knobs to name the folder by
    local dir=$1; shift
    nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
        "hydra.sweep.dir=$dir" prune=none "$@"
}
# shellcheck disable=SC2086
case "${1:-}" in
grid1)
    ( search $T/runs/grid 'seed=range(0,10)' sampler=nsga2 prune.band=0.05 prune.warmup_trials=10 prune.min_neighbours=3 \
          'prune.margin=-1.0,-0.5,-0.25,0.5' ) &
    ( search $T/runs/grid 'seed=range(0,10)' sampler=nsga2 prune.margin=0.0 prune.band=0.05 prune.warmup_trials=10 prune.min_neighbours=1,2
      search $T/runs/grid 'seed=range(0,10)' sampler=nsga2 prune.margin=0.0 prune.band=0.1 prune.warmup_trials=10 prune.min_neighbours=3
      search $T/runs/grid 'seed=range(0,10)' sampler=nsga2 prune.margin=0.0 prune.band=0.05 prune.warmup_trials=5 prune.min_neighbours=3 ) &
    wait ;;
grid2)
    ( search $T/runs/grid 'seed=range(0,10)' sampler=nsga2 prune.margin=0.0 prune.band=0.1 prune.warmup_trials=10 prune.min_neighbours=2 ) &
    ( search $T/runs/grid 'seed=range(0,10)' sampler=nsga2 prune.margin=-0.25 prune.band=0.05 prune.warmup_trials=10 prune.min_neighbours=2 ) &
    ( search $T/runs/grid 'seed=range(0,10)' sampler=random prune.margin=0.0 prune.band=0.05 prune.warmup_trials=10 prune.min_neighbours=2 ) &
    wait ;;
confirm)
    ( unpruned $T/runs/confirm 'seed=range(10,20)' sampler=nsga2 ) &
    ( unpruned $T/runs/confirm 'seed=range(10,20)' sampler=random ) &
    wait
    ( search $T/runs/confirm 'seed=range(10,20)' sampler=nsga2,random prune.margin=0.0 prune.band=0.05 prune.warmup_trials=10 prune.min_neighbours=2 ) &
    ( search $T/runs/confirm 'seed=range(10,20)' sampler=nsga2,random $OLD ) &
    wait ;;
working)
    # the policy's second version (neighbours below half the best trained accuracy not counted; the
    # predictor's error allowed on the throughput), tried once on fresh tuning seeds 100-109, NSGA-II:
    #   python experiments/nb201_pruning/tuning/summarize.py $T/runs/working --out working_neighbours
    unpruned $T/runs/working 'seed=range(100,110)' sampler=nsga2 'hydra.sweep.subdir=${sampler.name}-${prune.name}/s${seed}'
    nasutil-search --config-dir experiments/nb201_pruning --config-name nb201_pruning -m storage.heartbeat_interval=null \
        "hydra.sweep.dir=$T/runs/working" 'hydra.sweep.subdir=${sampler.name}-${prune.name}/s${seed}' \
        'seed=range(100,110)' sampler=nsga2 prune=dominated_throughput ;;
*) echo "usage: tune.sh grid1|grid2|confirm|working" >&2; exit 2 ;;
esac
