#!/usr/bin/env bash
# The fast-end guard (`prune.top_band`), screened on the tuning seeds 500-509 (the third version's tuning seeds;
# their unpruned searches and the defaults' pruned ones are in results/measured_v2/tuning/trials.csv.gz), as real
# searches: NSGA-II and TPE, 300 trials, no anchors (as those searches), pruned arm only. Run from the repository
# root; runs go to runs_measured_v4_tuning/ (not committed).
#   sweep:   the pruned searches, one run folder per setting
#   replay:  the replay screen along the unpruned searches (screen_v4.csv), then the sweep consolidated with the
#            tuning seeds' unpruned searches into results/measured_v4/tuning/trials.csv.gz and each setting's
#            pairs (<setting>.csv, <setting>_summary.json)
#   anchors16: the setting and the unpruned search with the 16 predicted-fastest cells trained first (the fastest
#            measured cell is 15th by prediction), NSGA-II and TPE, into results/measured_v4/tuning_anchors16/
#            (runs in runs_measured_v4_tuning_anchors16/)
set -euo pipefail
cd "$(dirname "$0")/../../.."
E=experiments/nb201_pruning
R=$E/runs_measured_v4_tuning
T=$E/results/measured_v4/tuning
sweep() {
    nasutil-search --config-dir $E --config-name nb201_pruning -m storage.heartbeat_interval=null evaluator=table \
        n_trials=300 'seed=range(500,510)' hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=$R "$@"
}
case "${1:-all}" in
sweep)
    sweep sampler=nsga2,tpe prune=dominated_throughput prune.error_quantile=0.6 prune.top_band=0.2 \
        'hydra.sweep.subdir=${sampler.name}-q60_guard20/s${seed}'
    sweep sampler=nsga2,tpe prune=dominated_throughput prune.error_quantile=0.5 prune.top_band=0.2 \
        'hydra.sweep.subdir=${sampler.name}-q50_guard20/s${seed}' ;;
replay)
    mkdir -p $T
    python $E/tuning/replay_measured.py $E/results/measured_v2/tuning/trials.csv.gz --out $T/screen_v4.csv --grid \
        error_quantile=0.75 'top_band=0.1' 'top_band=0.2' 'top_band=0.3' 'top_band=0.4' \
        'error_quantile=0.6 top_band=0.1' 'error_quantile=0.6 top_band=0.2' 'error_quantile=0.6 top_band=0.3' \
        error_quantile=0.5 'error_quantile=0.5 top_band=0.1' 'error_quantile=0.5 top_band=0.2' \
        'error_quantile=0.5 top_band=0.3'
    python $E/tuning/v4_tuning_pairs.py $R $T ;;
anchors16)
    A=$E/runs_measured_v4_tuning_anchors16
    rm -rf $A
    sweep sampler=nsga2,tpe anchors=16 hydra.sweep.dir=$A prune=none
    sweep sampler=nsga2,tpe anchors=16 hydra.sweep.dir=$A prune=dominated_throughput prune.error_quantile=0.5 \
        prune.top_band=0.2 'hydra.sweep.subdir=${sampler.name}-q50_guard20/s${seed}'
    python $E/analyze_measured.py --runs $A --out $E/results/measured_v4/tuning_anchors16 --pruned-arm q50_guard20 ;;
all) "$0" sweep && "$0" replay && "$0" anchors16 ;;
esac
