#!/usr/bin/env bash
# One trained neighbour is evidence enough (`prune.min_neighbours=1`, where 2 before), with the sixteen anchors and
# the fast-end guard of the sixth version (`anchors=16 prune.error_quantile=0.5 prune.top_band=0.2`), chosen by the
# replay screen on the tuning seeds 500-509 (tuning/replay_measured.py on results/measured_v4/tuning_anchors16/) for
# the trainings saved at 150 trials; on fresh evaluation seeds 1400-1419 (used by nothing before), 300 trials,
# pruned by prediction and scored by measurement, `anchors=16` in both arms: the unpruned search and the pruned one
# (<sampler>-a16_q50_guard20_n1), NSGA-II and TPE first, then random search; then the analysis into
# results/measured_v7/. Run from the repository root; a stage name runs one stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
E=experiments/nb201_pruning
R=$E/runs_measured_v7
O=$E/results/measured_v7
sweep() {
    nasutil-search --config-dir $E --config-name nb201_pruning -m storage.heartbeat_interval=null \
        evaluator=table n_trials=300 'seed=range(1400,1420)' anchors=16 \
        hydra/launcher=joblib hydra.launcher.n_jobs=2 hydra.sweep.dir=$R "$@"
}
case "${1:-all}" in
unpruned) sweep prune=none sampler=tpe,nsga2 ;;
setting) sweep prune=dominated_throughput prune.error_quantile=0.5 prune.top_band=0.2 prune.min_neighbours=1 sampler=tpe,nsga2 \
    'hydra.sweep.subdir=${sampler.name}-a16_q50_guard20_n1/s${seed}' ;;
random) sweep prune=none sampler=random && sweep prune=dominated_throughput prune.error_quantile=0.5 prune.min_neighbours=1 \
    prune.top_band=0.2 sampler=random 'hydra.sweep.subdir=${sampler.name}-a16_q50_guard20_n1/s${seed}' ;;
analysis) python $E/analyze_measured.py --runs $R --out $O --pruned-arm a16_q50_guard20_n1 ;;
all) rm -rf $R && "$0" unpruned && "$0" setting && "$0" random && "$0" analysis ;;
esac
