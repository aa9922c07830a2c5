"""Co-location planned before anything runs (`nasutil.colocate.planning`, what `nasutil colocate --pack` and
`--memory-budget-gb` use), and a group measured in this process that breaks becoming a failed row: the library
work the command used to do itself, called from its new home on the CPU."""

from __future__ import annotations

import pytest

from nasutil import get_space
from nasutil.colocate import GroupMeasurement, measure_group_in_process, memory_bytes, over_budget, plan_groups
from nasutil.colocate.packing import estimated_memory_bytes, pack_by_latency
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, MeasureConfig

CELL = "|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2|"
FP16 = MeasureConfig(device="cpu", dtype="fp16", batch_size=8, mode="eager")


def _candidates(n: int, seed: int = 0) -> list[Candidate]:
    return [Candidate("nb201", a.to_string()) for a in get_space("nb201").sample_many(n, seed)]


class FixedPredictor:
    """Stands for a `nasutil.predictor.Predictor`: a latency per arch, and the target it was asked for."""

    def __init__(self, latency: dict[str, float]) -> None:
        self.latency, self.asked = latency, []

    def target(self, dtype: str, batch_size: int, mode: str):
        self.asked.append((dtype, batch_size, mode))
        return (dtype, batch_size, mode)

    def predict_many(self, space, archs, target):
        class P:
            def __init__(self, ms: float) -> None:
                self.latency_ms = ms
        return [P(self.latency[a]) for a in archs]


def test_memory_is_estimated_from_each_networks_op_listing():
    space = get_space("nb201")
    ops = space.operators(space.parse(CELL))
    assert memory_bytes([Candidate("nb201", CELL)], FP16) == [estimated_memory_bytes(ops, 8, 2)]
    fp32 = memory_bytes([Candidate("nb201", CELL)], FP16.with_(dtype="fp32"))
    big = memory_bytes([Candidate("nb201", CELL)], FP16.with_(batch_size=64))
    assert fp32 == [2 * memory_bytes([Candidate("nb201", CELL)], FP16)[0]] and big[0] > fp32[0] / 2


def test_a_group_over_the_budget_is_named_with_its_size():
    group = [Candidate("nb201", CELL)] * 2
    needed = sum(memory_bytes(group, FP16)) / 2**30
    assert over_budget(group, FP16, needed * 1.01) is None
    assert over_budget(group, FP16, 0.001) == (f"the group needs about {needed:.3f} GiB, over the memory budget of "
                                               f"0.001 GiB")
    assert " at batch 8, over" in over_budget(group, FP16, 0.001, at_batch=True)


def test_plan_groups_packs_by_the_predictors_latency_within_the_budget():
    candidates = _candidates(6)
    latency = {c.arch: float(i % 3) + i / 10 for i, c in enumerate(candidates)}
    predictor = FixedPredictor(latency)
    groups = plan_groups(candidates, FP16.with_(dtype="fp32"), 2, None, predictor)
    assert groups == pack_by_latency([latency[c.arch] for c in candidates], 2, memory_bytes(candidates, FP16.with_(
        dtype="fp32")), None)
    assert predictor.asked == [("fp16", 8, "cudagraph")]  # fp32 packs by fp16 figures, from CUDA graphs
    memory = memory_bytes(candidates, FP16)
    budget_gb = (max(memory) * 1.5) / 2**30  # room for one network, never two of the larger ones
    tight = plan_groups(candidates, FP16, 6, budget_gb, predictor)
    assert all(g.predicted_memory_bytes <= budget_gb * 2**30 for g in tight) and len(tight) >= 3
    with pytest.raises(NasutilError, match="too small for one candidate"):
        plan_groups(candidates, FP16, 2, min(memory) / 2 / 2**30, predictor)


def test_plan_groups_with_the_shipped_profile():
    from nasutil.predictor import make_predictor

    groups = plan_groups(_candidates(6), FP16, 3, None, make_predictor("auto"))
    assert sorted(len(g.members) for g in groups) == [3, 3]
    assert groups[0].predicted_latency_ms <= groups[1].predicted_latency_ms


def test_a_group_that_breaks_in_process_is_a_failed_row_and_a_user_error_is_raised(installed_plugin):
    cpu = MeasureConfig(device="cpu", dtype="fp32", batch_size=1, mode="eager", channels_last=False, repeats=2,
                        min_window_ms=1.0, warmup=1, input_size=9, counters=False)
    row = measure_group_in_process([Candidate("tiny", "w8"), Candidate("tiny", "raise")], cpu, "sequential")
    assert isinstance(row, GroupMeasurement) and row.status == "failed" and row.error.startswith("RuntimeError")
    with pytest.raises(NasutilError):
        measure_group_in_process([Candidate("nb201", "not an arch")], cpu, "sequential")
