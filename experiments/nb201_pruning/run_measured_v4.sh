#!/usr/bin/env bash
# The fast-end guard with a lower error allowance (`prune.error_quantile=0.5 prune.top_band=0.2`, screened on the
# tuning seeds 500-509 by tuning/tune_measured_v4.sh) against the policy's defaults, on fresh evaluation seeds
# 1100-1119 (used by nothing before), 300 trials, pruned by prediction and scored by measurement, `anchors=4` in every
# arm (as run_measured_q60_reference.sh): the unpruned search, the pruned search with the setting
# (<sampler>-q50_guard20) and with the defaults (<sampler>-dominated_throughput), NSGA-II and TPE first, then random
# search; then the analysis into results/measured_v4/ (measured.csv and measured_summary.json: the setting;
# defaults.csv and defaults_summary.json: the defaults). Run from the repository root; a stage name runs one stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
E=experiments/nb201_pruning
R=$E/runs_measured_v4
O=$E/results/measured_v4
sweep() {
    nasutil-search --config-dir $E --config-name nb201_pruning -m storage.heartbeat_interval=null \
        evaluator=table n_trials=300 'seed=range(1100,1120)' anchors=4 \
        hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=$R "$@"
}
setting() { sweep prune=dominated_throughput prune.error_quantile=0.5 prune.top_band=0.2 \
    'hydra.sweep.subdir=${sampler.name}-q50_guard20/s${seed}' "$@"; }
analysis() {
    python $E/analyze_measured.py --runs $R --out $O --pruned-arm dominated_throughput
    mv $O/measured.csv $O/defaults.csv && mv $O/measured_summary.json $O/defaults_summary.json
    python $E/analyze_measured.py --out $O --pruned-arm q50_guard20
}
case "${1:-all}" in
unpruned) sweep prune=none sampler=nsga2,tpe ;;
setting) setting sampler=nsga2,tpe ;;
defaults) sweep prune=dominated_throughput sampler=nsga2,tpe ;;
random) sweep prune=none sampler=random && setting sampler=random && sweep prune=dominated_throughput sampler=random ;;
analysis) analysis ;;
all) rm -rf $R && "$0" unpruned && "$0" setting && "$0" defaults && "$0" random && "$0" analysis ;;
esac
