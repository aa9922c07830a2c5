#!/usr/bin/env bash
# Four anchors ranked on the operator sum: `nasutil.search.anchors` ranks the fast end on the operator sum of the
# device's shipped profile (the learned model's trees flatten there; benchmarks/anchor_ranking.py). The prediction
# table names no device, so `predictor.device_name` names it here; without it (RANKED_ON=learned) the anchors are
# ranked on the table's own, learned, predictions, as in every earlier version. The seventh version's options with
# four anchors instead of sixteen (`anchors=4 prune.error_quantile=0.5 prune.top_band=0.2 prune.min_neighbours=1`),
# on fresh evaluation seeds 1500-1519 (used by nothing before), 300 trials, pruned by prediction and scored by
# measurement, `anchors=4` in both arms: the unpruned search and the pruned one (<sampler>-a4_q50_guard20_n1),
# NSGA-II and TPE first, then random search; then the analysis into results/measured_v8/ (measured_v8_learned/).
# Run from the repository root; a stage name runs one stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
E=experiments/nb201_pruning
RANKED_ON=${RANKED_ON:-operators}
case "$RANKED_ON" in
operators) SUFFIX=; DEVICE=('predictor.device_name=NVIDIA H200') ;;
learned) SUFFIX=_learned; DEVICE=() ;;
*) echo "RANKED_ON must be operators or learned" >&2; exit 2 ;;
esac
R=$E/runs_measured_v8$SUFFIX
O=$E/results/measured_v8$SUFFIX
sweep() {
    nasutil-search --config-dir $E --config-name nb201_pruning -m storage.heartbeat_interval=null \
        evaluator=table n_trials=300 'seed=range(1500,1520)' anchors=4 "${DEVICE[@]}" \
        hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=$R "$@"
}
case "${1:-all}" in
unpruned) sweep prune=none sampler=tpe,nsga2 ;;
setting) sweep prune=dominated_throughput prune.error_quantile=0.5 prune.top_band=0.2 prune.min_neighbours=1 sampler=tpe,nsga2 \
    'hydra.sweep.subdir=${sampler.name}-a4_q50_guard20_n1/s${seed}' ;;
random) sweep prune=none sampler=random && sweep prune=dominated_throughput prune.error_quantile=0.5 prune.min_neighbours=1 \
    prune.top_band=0.2 sampler=random 'hydra.sweep.subdir=${sampler.name}-a4_q50_guard20_n1/s${seed}' ;;
analysis) python $E/analyze_measured.py --runs $R --out $O --pruned-arm a4_q50_guard20_n1 ;;
all) rm -rf $R && "$0" unpruned && "$0" setting && "$0" random && "$0" analysis ;;
esac
