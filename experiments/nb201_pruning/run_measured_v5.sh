#!/usr/bin/env bash
# Sixteen anchors with the fast-end guard (`anchors=16 prune.error_quantile=0.5 prune.top_band=0.2`, tried on the
# tuning seeds 500-509 by tuning/tune_measured_v4.sh anchors16) on fresh evaluation seeds 1200-1219 (used by nothing
# before), 300 trials, pruned by prediction and scored by measurement, `anchors=16` in both arms: the unpruned search
# and the pruned one (<sampler>-a16_q50_guard20), NSGA-II and TPE; then the analysis into results/measured_v5/.
# Run from the repository root; a stage name runs one stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
E=experiments/nb201_pruning
R=$E/runs_measured_v5
O=$E/results/measured_v5
sweep() {
    nasutil-search --config-dir $E --config-name nb201_pruning -m storage.heartbeat_interval=null \
        evaluator=table n_trials=300 'seed=range(1200,1220)' anchors=16 \
        hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=$R "$@"
}
case "${1:-all}" in
unpruned) sweep prune=none sampler=tpe,nsga2 ;;
setting) sweep prune=dominated_throughput prune.error_quantile=0.5 prune.top_band=0.2 sampler=tpe,nsga2 \
    'hydra.sweep.subdir=${sampler.name}-a16_q50_guard20/s${seed}' ;;
analysis) python $E/analyze_measured.py --runs $R --out $O --pruned-arm a16_q50_guard20 ;;
all) rm -rf $R && "$0" unpruned && "$0" setting && "$0" analysis ;;
esac
