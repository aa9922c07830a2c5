#!/usr/bin/env bash
# Tuning of the dominated_throughput policy's third version, scored on measured throughput, on the tuning seeds
# 500-509 (used by nothing before; the evaluation seeds are 600-619, run_measured_v2.sh). Run from the
# repository root; runs go to runs_measured_v2_tuning/ (not committed).
#   sweep:   unpruned and pruned searches, 300 trials, NSGA-II, TPE and random search. The committed pruned
#            arm (<sampler>-dominated_throughput) ran the policy's previous version, the one committed before the
#            third (prune.py as of the "Prune by prediction, score by measurement" change); run today, this
#            step runs the current one.
#   confirm: the third version with its defaults, pruned searches on the same seeds (<sampler>-dominated_throughput_v3)
#   replay:  consolidate both into results/measured_v2/tuning/trials.csv.gz, then the diagnosis of the previous
#            version's pruned candidates (why.csv), the screen of settings along the unpruned searches (screen.csv)
#            and the summaries of the confirmation (confirm.csv, confirm_summary.json) and of the previous version's
#            pruned searches (previous.csv, previous_summary.json)
set -euo pipefail
cd "$(dirname "$0")/../../.."
E=experiments/nb201_pruning
R=$E/runs_measured_v2_tuning
T=$E/results/measured_v2/tuning
sweep() {
    nasutil-search --config-dir $E --config-name nb201_pruning -m storage.heartbeat_interval=null evaluator=table \
        n_trials=300 'seed=range(500,510)' sampler=nsga2,tpe,random hydra/launcher=joblib hydra.launcher.n_jobs=2 \
        hydra.sweep.dir=$R "$@"
}
case "${1:-all}" in
sweep) sweep prune=none,dominated_throughput ;;
confirm) sweep prune=dominated_throughput 'hydra.sweep.subdir=${sampler.name}-dominated_throughput_v3/s${seed}' ;;
replay)
    python $E/tuning/replay_measured.py $T/trials.csv.gz --runs $R --why $T/why.csv --out $T/screen.csv --grid \
        error_quantile=1.0 error_quantile=0.9 error_quantile=0.85 error_quantile=0.75 error_quantile=0.67 \
        error_quantile=0.6 error_quantile=0.5 'error_quantile=0.75 band=0.1' 'error_quantile=0.75 min_neighbours=3' \
        'error_quantile=0.75 error_band=0.1' throughput_error=0.0
    python $E/analyze_measured.py --out $T --pruned-arm dominated_throughput_v3
    mv $T/measured.csv $T/confirm.csv && mv $T/measured_summary.json $T/confirm_summary.json
    python $E/analyze_measured.py --out $T --pruned-arm dominated_throughput
    mv $T/measured.csv $T/previous.csv && mv $T/measured_summary.json $T/previous_summary.json ;;
all) "$0" sweep && "$0" confirm && "$0" replay ;;
esac
