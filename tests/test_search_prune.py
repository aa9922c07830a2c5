"""Prune-before-training policies: each prunes what it should and keeps what it should."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import nasutil_conf
import pytest
from omegaconf import OmegaConf

from nasutil.errors import NasutilError
from nasutil.pareto import front_2d, front_mask_2d, hypervolume_2d, pareto_mask
from nasutil.predictor import Prediction
from nasutil.search.config import instantiate_group
from nasutil.search.objectives import Objectives
from nasutil.search.prune import DominatedThroughput, History, PrunePolicy, Seen, UtilizationQuantile, history_from

PRUNE_CONFIGS = Path(nasutil_conf.__file__).parent / "prune"


def make_policy(cfg: dict) -> PrunePolicy:
    """A policy as `nasutil-search prune=NAME prune.KEY=VALUE` makes it: the shipped config, overridden."""
    path = PRUNE_CONFIGS / f"{cfg.get('name')}.yaml"
    node = OmegaConf.to_container(OmegaConf.load(path)) if path.is_file() else {}
    return instantiate_group({**node, **cfg}, "prune")


def cand(throughput: float, utilization: float = 0.02, latency: float | None = None) -> Prediction:
    return Prediction("nb201", "arch", "test", "GPU", "fp16", 256, "cudagraph", 1,
                      latency or 256_000 / throughput, throughput, utilization, 1)


def test_none_never_prunes():
    history = History([Seen(1000.0, 1.0, 0.5, 90.0)] * 20)
    assert make_policy({"name": "none"}).decide(cand(1.0, 0.0), history) is None


def test_threshold_prunes_below_and_keeps_above():
    policy = make_policy({"name": "utilization_threshold", "threshold": 0.015})
    assert "1.00% < threshold 1.50%" in policy.decide(cand(1000, 0.01), History())
    assert policy.decide(cand(1000, 0.02), History()) is None


def test_quantile_waits_for_warmup_then_cuts_at_the_quantile_of_what_was_seen():
    policy = UtilizationQuantile(quantile=0.5, warmup_trials=4)
    seen = [Seen(1000.0, 1.0, u) for u in (0.01, 0.02, 0.03)]
    assert policy.decide(cand(1000, 0.001), History(seen)) is None  # 3 < warm-up of 4
    seen.append(Seen(1000.0, 1.0, 0.04))
    assert policy.decide(cand(1000, 0.02), History(seen)) is not None  # median is 2.5%
    assert policy.decide(cand(1000, 0.03), History(seen)) is None


def test_dominated_prunes_a_slow_candidate_whose_speed_class_is_beaten_by_a_faster_front_member():
    # Trained: a fast accurate cell (92% at 2000/s) and three slow mediocre ones (~85% at ~1000/s).
    trained = [Seen(2000.0, 1.0, 0.02, 92.0), Seen(1000.0, 1.0, 0.02, 85.0), Seen(1010.0, 1.0, 0.02, 86.0),
               Seen(990.0, 1.0, 0.02, 84.0)]
    policy = DominatedThroughput(warmup_trials=4, band=0.05, min_neighbours=3)
    reason = policy.decide(cand(1000.0), History(trained))
    assert reason is not None and "92.00%" in reason and "86.00%" in reason
    # Faster than anything on the front: it could extend the front, so it is trained.
    assert policy.decide(cand(2500.0), History(trained)) is None
    # A similar-speed trained cell that beats the front member means cells of that speed can matter.
    better = trained + [Seen(995.0, 1.0, 0.02, 93.0)]  # slower than the candidate, more accurate than 92%
    assert policy.decide(cand(1000.0), History(better)) is None
    # Too few neighbours to bound the accuracy: train.
    assert DominatedThroughput(warmup_trials=4, min_neighbours=4).decide(cand(1000.0), History(trained)) is None
    # A margin demands a clearer win before pruning.
    assert DominatedThroughput(warmup_trials=4, margin=10.0).decide(cand(1000.0), History(trained)) is None


def test_dominated_says_which_check_kept_a_candidate():
    """`stopped_by` names the first check that keeps a candidate, and None exactly where `decide` prunes."""
    trained = [Seen(2000.0, 1.0, 0.02, 92.0), Seen(1000.0, 1.0, 0.02, 85.0), Seen(1010.0, 1.0, 0.02, 86.0),
               Seen(990.0, 1.0, 0.02, 84.0)]
    policy = DominatedThroughput(warmup_trials=4, band=0.05, min_neighbours=3)
    cases = [(policy, cand(1000.0), trained[:3], "warm-up"),
             (DominatedThroughput(warmup_trials=4, min_neighbours=4), cand(1000.0), trained, "neighbours"),
             (policy, cand(2500.0), trained + [Seen(2480.0, 1.0, 0.02, 80.0), Seen(2490.0, 1.0, 0.02, 81.0),
                                               Seen(2470.0, 1.0, 0.02, 82.0)], "no faster front member"),
             (DominatedThroughput(warmup_trials=4, margin=10.0), cand(1000.0), trained, "bound not beaten"),
             (policy, cand(1000.0), trained, None)]
    for judge, candidate, seen, check in cases:
        assert judge.stopped_by(candidate, History(seen)) == check
        assert (judge.decide(candidate, History(seen)) is None) == (check is not None)


def test_dominated_estimate_is_the_neighbours_bound_capped_by_the_dominating_front_member():
    trained = [Seen(2000.0, 1.0, 0.02, 92.0), Seen(1000.0, 1.0, 0.02, 85.0), Seen(1010.0, 1.0, 0.02, 86.0),
               Seen(990.0, 1.0, 0.02, 84.0)]
    policy = DominatedThroughput(warmup_trials=4, band=0.05, min_neighbours=3)
    assert policy.estimate(cand(1000.0), History(trained)) == 86.0
    # With a negative margin the policy prunes candidates whose bound beats the front member; the
    # estimate is capped so that the sampler still sees them dominated.
    assert DominatedThroughput(warmup_trials=4, margin=-10.0).estimate(cand(1000.0), History(trained + [
        Seen(995.0, 1.0, 0.02, 93.0)])) == 92.0
    assert policy.estimate(cand(2500.0), History(trained)) is None  # nothing as fast on the front
    assert DominatedThroughput(min_neighbours=4).estimate(cand(1000.0), History(trained)) is None
    assert make_policy({"name": "utilization_threshold", "threshold": 0.5}).estimate(cand(1000.0), History()) is None


def test_dominated_ignores_untrained_candidates_for_accuracy():
    seen = [Seen(2000.0, 1.0, 0.02, None)] * 10 + [Seen(1000.0, 1.0, 0.02, 85.0)] * 3
    # The fast candidates were never trained: no trained front member is as fast as 1,020/s.
    assert DominatedThroughput(warmup_trials=3).decide(cand(1020.0), History(seen)) is None


def test_dominated_does_not_count_neighbours_that_failed_to_learn():
    """NAS-Bench-201's fast cells are often `none`-edged and stuck at 10%; two of them beside a candidate
    say nothing about it, so a fast front member at 88% must not get it pruned."""
    trained = [Seen(2000.0, 1.0, 0.02, 88.0), Seen(1000.0, 1.0, 0.02, 10.0), Seen(1010.0, 1.0, 0.02, 10.1),
               Seen(500.0, 1.0, 0.02, 93.0)]
    assert DominatedThroughput(warmup_trials=4, min_neighbours=2).decide(cand(1000.0), History(trained)) is None
    # Counted as before where they are allowed to be (degenerate_fraction 0): pruned on a 10.1% bound.
    reason = DominatedThroughput(warmup_trials=4, min_neighbours=2, degenerate_fraction=0.0).decide(
        cand(1000.0), History(trained))
    assert reason is not None and "10.10%" in reason


def test_dominated_allows_for_the_predictors_error_on_the_candidates_throughput():
    trained = [Seen(1040.0, 1.0, 0.02, 92.0), Seen(1000.0, 1.0, 0.02, 85.0), Seen(1010.0, 1.0, 0.02, 86.0),
               Seen(990.0, 1.0, 0.02, 84.0)]
    exact = replace(cand(1000.0), expected_error=0.0)
    rough = replace(cand(1000.0), expected_error=0.08)  # could really be 1,080/s: faster than the front member
    policy = DominatedThroughput(warmup_trials=4, min_neighbours=3)
    assert "error allowed 0.0%" in policy.decide(exact, History(trained))
    assert policy.decide(rough, History(trained)) is None and policy.estimate(rough, History(trained)) is None
    assert DominatedThroughput(warmup_trials=4, min_neighbours=3, throughput_error=0.0).decide(
        rough, History(trained)) is not None  # a fixed error overrides the predictor's


def test_latency_slo_policy_uses_predicted_latency():
    policy = make_policy({"name": "latency_slo", "max_latency_ms": 3.0})
    assert policy.decide(cand(1000.0, latency=3.5), History()).startswith("predicted latency 3.500 ms > SLO 3 ms")
    assert policy.decide(cand(1000.0, latency=2.5), History()) is None
    with pytest.raises(NasutilError, match="max_latency_ms"):
        make_policy({"name": "latency_slo", "max_latency_ms": None})


@pytest.mark.parametrize("cfg, message", [
    ({"name": "nope"}, "prune config needs a _target_"),
    ({"name": "utilization_threshold", "threshold": 0.1, "extra": 1}, "takes no option extra"),
    ({"name": "utilization_threshold", "threshold": 2.0}, "in \\[0, 1\\]"),
    ({"name": "utilization_quantile", "quantile": 1.0}, "quantile"),
    ({"_target_": "no_such_module_xyz.Policy"}, "cannot import prune"),
    ({"name": "dominated_throughput", "degenerate_fraction": 1.5}, "degenerate_fraction"),
    ({"name": "dominated_throughput", "throughput_error": "big"}, "throughput_error"),
    ({"name": "dominated_throughput", "error_quantile": 1.5}, "error_quantile must be a fraction"),
    ({"name": "dominated_throughput", "error_quantile": float("nan")},
     "prune.error_quantile must be a number, got nan"),
    ({"name": "dominated_throughput", "fidelity": "rungs"}, "prune.fidelity must be one of final, rung, auto"),
    ({"name": "dominated_throughput", "rung_min_neighbours": 0}, "prune.rung_min_neighbours must be a whole number"),
    ({"name": "dominated_throughput", "rung_band": -0.1}, "prune.rung_band must be a fraction"),
])
def test_bad_policy_configs_are_one_line_errors(cfg, message):
    with pytest.raises(NasutilError, match=message):
        make_policy(cfg)


class EveryOther(PrunePolicy):
    name = "every_other"

    def decide(self, candidate, history):
        return "odd" if len(history.seen) % 2 else None


def test_a_policy_of_your_own_is_named_by_target():
    policy = make_policy({"name": "every_other", "_target_": f"{__name__}.EveryOther"})
    assert isinstance(policy, EveryOther)
    assert policy.decide(cand(1.0), History([Seen(1.0, 1.0, 0.1)])) == "odd"
    with pytest.warns(FutureWarning, match="prune._target_"):  # the old module:Class name, for one release
        assert isinstance(make_policy({"name": f"{__name__}:EveryOther"}), EveryOther)


def test_history_from_stored_records_keeps_order_and_accuracy():
    records = [{"predicted_throughput_per_s": 10.0, "predicted_latency_ms": 1.0, "predicted_utilization": 0.1,
                "accuracy": 90.0}, {"arch": "without a prediction"},
               {"predicted_throughput_per_s": 20.0, "predicted_latency_ms": 0.5, "predicted_utilization": None}]
    h = history_from(records)
    assert [s.throughput_per_s for s in h.seen] == [10.0, 20.0]
    assert [s.accuracy for s in h.trained] == [90.0]
    front = History([Seen(10.0, 1, None, 90.0), Seen(20.0, 1, None, 80.0), Seen(15.0, 1, None, 70.0)]).front()
    assert [(s.throughput_per_s, s.accuracy) for s in front] == [(20.0, 80.0), (10.0, 90.0)]


def test_history_from_stored_records_reads_the_first_rungs_accuracy():
    base = {"predicted_throughput_per_s": 10.0, "predicted_latency_ms": 1.0, "predicted_utilization": 0.1}
    records = [{**base, "rungs": {"0.111111": 40.0, "0.333333": 60.0}}, {**base, "rungs": {"0.333333": 61.0}},
               {**base, "rungs": {"0.111111": "text"}}, {**base, "accuracy": 90.0}]
    assert [s.rung_accuracy for s in history_from(records, 0.111111).seen] == [40.0, None, None, None]
    assert [s.rung_accuracy for s in history_from(records).seen] == [None] * 4


def _at_rung(throughput: float, rung: float, final: float | None = None, measured: float | None = None) -> Seen:
    return Seen(throughput, 1.0, 0.02, final, measured, f"cell{throughput:g}", rung_accuracy=rung)


def test_dominated_at_the_first_rung_judges_candidates_still_training():
    """In a population nothing has ended yet when most candidates are asked: at the first rung there is evidence.
    A fast candidate ahead at the first rung dominates a slow one's neighbours there."""
    rungs = [_at_rung(2000.0, 60.0), _at_rung(1000.0, 40.0), _at_rung(1010.0, 42.0), _at_rung(990.0, 41.0)]
    final = DominatedThroughput(warmup_trials=4, min_neighbours=3, fidelity="final")
    assert final.stopped_by(cand(1000.0), History(rungs)) == "warm-up"  # none trained to the end
    # a rung's accuracies are noisier: by default a bound there takes 4 cells (within 10%), where these are 3
    assert DominatedThroughput(warmup_trials=4, min_neighbours=3, fidelity="rung").stopped_by(
        cand(1000.0), History(rungs)) == "neighbours"
    for fidelity in ("rung", "auto"):
        policy = DominatedThroughput(warmup_trials=4, fidelity=fidelity, rung_min_neighbours=3)
        reason = policy.decide(cand(1000.0), History(rungs))
        assert reason is not None and reason.startswith("predicted dominated at the first rung: 60.00%")
        assert policy.decide(cand(2500.0), History(rungs)) is None  # it could be the fastest
        assert policy.estimate(cand(1000.0), History(rungs)) is None  # a rung's accuracy is no final estimate
    assert DominatedThroughput(warmup_trials=5, fidelity="rung").stopped_by(cand(1000.0), History(rungs)) == "warm-up"


def test_dominated_auto_judges_on_final_accuracies_once_warm():
    """At the first rung the slow cells trail the fast one; trained to the end, one of them beats it: `auto`
    follows the final accuracies once `warmup_trials` ended, where `rung` keeps to the first rung's."""
    seen = [_at_rung(2000.0, 60.0, 90.0, 2000.0), _at_rung(1000.0, 40.0, 85.0, 1000.0),
            _at_rung(995.0, 42.0, 93.0, 995.0), _at_rung(990.0, 41.0, 84.0, 990.0)]
    assert DominatedThroughput(warmup_trials=4, min_neighbours=3, fidelity="auto").decide(cand(1000.0), History(seen)) \
        is None
    assert DominatedThroughput(warmup_trials=4, min_neighbours=3, fidelity="final").decide(cand(1000.0),
                                                                                           History(seen)) is None
    assert DominatedThroughput(warmup_trials=4, fidelity="rung", rung_min_neighbours=3).decide(cand(1000.0),
                                                                                              History(seen)) is not None


def test_at_the_first_rung_a_candidate_keeps_its_measurement_only_with_a_rung_accuracy():
    seen = [_at_rung(10.0, 50.0, 80.0, 12.0), Seen(20.0, 1.0, None, 70.0, 25.0, "b")]
    view = History(seen).at_first_rung().seen
    assert [(s.accuracy, s.scored_throughput_per_s) for s in view] == [(50.0, 12.0), (None, None)]


def test_two_objective_fronts_agree_however_they_are_asked():
    points = [(90.0, 10.0), (80.0, 20.0), (70.0, 15.0), (80.0, 20.0), (95.0, 5.0), (60.0, 25.0)]
    front = front_2d(points, x=lambda p: p[1], y=lambda p: p[0])
    assert front == [(60.0, 25.0), (80.0, 20.0), (90.0, 10.0), (95.0, 5.0)]
    import numpy as np

    mask = front_mask_2d(np.array([p[0] for p in points]), np.array([p[1] for p in points]))
    assert [i for i, m in enumerate(mask) if m] == [0, 1, 4, 5]  # of equal points, the first
    assert sorted(front) == sorted(p for p, m in zip(points, mask) if m)


def test_hypervolume_and_pareto_mask():
    assert hypervolume_2d([(3, 1), (1, 3)], (0, 0)) == pytest.approx(5.0)
    assert hypervolume_2d([(3, 1), (1, 3), (1, 1), (-1, 5)], (0, 0)) == pytest.approx(5.0)
    assert pareto_mask([[1, 5], [2, 4], [1, 4]], ["maximize", "maximize"]) == [True, True, False]
    assert pareto_mask([[1, 5], [2, 4]], ["maximize", "minimize"]) == [False, True]


def test_objectives_values_and_constraints():
    obj = Objectives.from_config({"metrics": ["accuracy", "latency"], "latency_slo_ms": 3.0})
    assert obj.directions == ["maximize", "minimize"]
    record = {"accuracy": 91.0, "latency_ms": 3.5}
    assert obj.values(record) == [91.0, 3.5]
    assert obj.constraints(record) == {"latency_slo": pytest.approx(0.5)}
    with pytest.raises(NasutilError, match="unknown objective 'speed'"):
        Objectives.from_config({"metrics": ["accuracy", "speed"]})


def test_dominated_counts_a_cell_proposed_again_as_one_neighbour():
    """An adaptive sampler proposes a cell it already trained again (its result is reused): the two records are
    one cell's accuracy, not two neighbours, so they must not meet `min_neighbours` alone. Counted twice, they
    pruned a 93.8% candidate that would have joined the front (the faster front member has 93.7%)."""
    front = Seen(1320.0, 1.0, 0.02, 93.7, 1320.0, arch="front")
    seen = Seen(1160.0, 1.0, 0.02, 92.5, 1180.0, arch="seen")
    history = History([front, seen, seen] + [Seen(500.0 + i, 1.0, 0.02, 90.0, 510.0 + i, arch=f"slow{i}")
                                              for i in range(8)])
    policy = DominatedThroughput()
    assert policy.decide(cand(1150.0), history) is None and policy.estimate(cand(1150.0), history) is None
    # A second, different cell of that speed is the evidence asked for: then the candidate is pruned.
    other = Seen(1140.0, 1.0, 0.02, 92.0, 1160.0, arch="other")
    reason = policy.decide(cand(1150.0), History(history.seen + [other]))
    assert reason is not None and "2 working trained" in reason
    # Records without an arch (older callers) count one each, as before.
    anonymous = History([replace(s, arch=None) for s in history.seen])
    assert policy.decide(cand(1150.0), anonymous) is not None


def measured(predicted: float, error: float, accuracy: float, arch: str) -> Seen:
    """A trained cell scored on its measurement, `error` faster than predicted."""
    return Seen(predicted, 1.0, 0.02, accuracy, predicted * (1 + error), arch=arch)


def test_dominated_allows_a_quantile_of_the_measured_error_not_the_largest_one():
    """The largest error of the measured neighbours grows with their number (with a hundred it is the tail's
    tip), so it kept candidates that a faster front member plainly beats; a quantile of the errors asks the
    same of three neighbours as of a hundred. 1.0 is the largest, as before."""
    history = History([measured(3000.0, 0.0, 80.0, "fastest"), measured(1055.0, 0.02, 92.0, "front"),
                       measured(995.0, 0.02, 86.0, "n1"), measured(1005.0, 0.02, 85.0, "n2"),
                       measured(1010.0, 0.02, 84.0, "n3"), measured(950.0, 0.10, 83.0, "outlier")]
                      + [measured(1050.0 + 10 * i, 0.02 + 0.002 * i, 82.0, f"c{i}") for i in range(5)])
    reason = DominatedThroughput().decide(cand(1000.0), history)
    assert reason is not None and "92.00%" in reason and "86.00%" in reason and "error allowed 2.6%" in reason
    assert DominatedThroughput(error_quantile=1.0).decide(cand(1000.0), history) is None  # 10%: 1,100/s > 1,076/s


def test_dominated_trains_a_candidate_that_the_largest_error_seen_could_make_the_fastest():
    """The front's fast end holds most of its hypervolume and the predictor errs most on the fastest cells
    (nb201 on the H200: the fastest cell of all measured 26% faster than predicted). Its neighbours erred by
    2-3% only, so the old policy pruned a candidate predicted at 476/s behind the fastest front member (518/s,
    86.5%), which measured 557/s: it would have extended the front. A cell that beat its prediction by 12% says
    it could."""
    fast = [measured(505.0, 0.026, 86.5, "front"), measured(470.0, 0.021, 86.0, "n1"),
            measured(480.0, 0.021, 85.0, "n2")]
    slow = [measured(100.0 + i, 0.12 if i == 0 else 0.02, 90.0 + 0.1 * i, f"slow{i}") for i in range(8)]
    policy = DominatedThroughput()
    assert policy.decide(cand(476.0), History(fast + slow)) is None
    assert policy.estimate(cand(476.0), History(fast + slow)) is None
    # Once a trained cell is faster than that, the quantile decides again: pruned.
    faster = measured(600.0, 0.0, 70.0, "fastest")
    assert policy.decide(cand(476.0), History(fast + slow + [faster])) is not None


def test_a_policy_of_your_own_on_the_command_line(tmp_path, monkeypatch, capsys):
    """Started from `prune=none`, a class of one's own runs by `_target_`, and by the old `name=module:Class`
    with a one-line warning (that form once ran the option's own class, silently, and its warning was hidden);
    set over an option with settings of its own, it ends in one line saying where those settings come from."""
    from nasutil.cli.search_command import main

    monkeypatch.delenv("NASUTIL_WARNINGS", raising=False)
    common = ["n_trials=3", "plots=false", "progress=false", "predictor=analytical"]
    for n, setting in enumerate([f"prune._target_={__name__}.EveryOther", f"prune.name={__name__}:EveryOther"]):
        capsys.readouterr()
        assert main(["prune=none", setting, *common, f"hydra.run.dir={tmp_path / str(n)}"]) == 0
        captured = capsys.readouterr()
        assert "prune every_other" in captured.out, captured.out[-400:]
        told = [line for line in captured.err.splitlines() if "deprecated" in line]
        assert told == ([f"nasutil-search: warning: prune.name={__name__}:EveryOther is deprecated: name the class "
                         f"with prune._target_={__name__}.EveryOther"] if n else []), told
    assert main([f"prune._target_={__name__}.EveryOther", *common, f"hydra.run.dir={tmp_path / 'x'}"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith(f"nasutil-search: error: prune._target_={__name__}.EveryOther "
                                                   "takes no option band"), error
    assert error[0].endswith("(takes: none; they come with prune=dominated_throughput: start from one without "
                             "them, such as prune=none)"), error


def test_the_installed_command_finds_a_policy_in_the_folder_it_runs_from(tmp_path):
    """docs/search.md's `prune._target_=my_module.MyPolicy` with my_module.py beside the user once failed with
    "Error loading 'my_module.MyPolicy':" and nothing after it: the console script looked only where it was
    installed."""
    import shutil
    import subprocess

    command = shutil.which("nasutil-search")
    if command is None:
        pytest.skip("the nasutil-search command is not installed")
    (tmp_path / "my_module.py").write_text(
        "from nasutil.search.prune import PrunePolicy\n\n\n"
        "class MyPolicy(PrunePolicy):\n    name = 'mine'\n\n    def decide(self, candidate, history):\n        return None\n")
    common = ["n_trials=2", "plots=false", "progress=false", "predictor=analytical"]
    done = subprocess.run([command, "prune=none", "prune._target_=my_module.MyPolicy", *common], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "prune mine" in done.stdout, done.stderr[-600:]
    missing = subprocess.run([command, "prune=none", "prune._target_=not_here.MyPolicy", *common], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        "nasutil-search: error: cannot import prune._target_=not_here.MyPolicy: ModuleNotFoundError: No module named "
        "'not_here' (a module of your own must be importable: installed, or in the folder the command runs from)"]
    assert missing.stdout == ""  # Hydra's own log of the failure, three lines, once went to standard output
