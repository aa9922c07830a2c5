"""Plan co-location before anything runs: each candidate's device memory (from its op listing), whether a
group fits a memory budget, and groups of similar predicted latency within it (`nasutil.colocate.packing`).

    from nasutil.colocate.planning import over_budget, plan_groups
    groups = plan_groups(candidates, config, group_size=4, memory_budget_gb=8, predictor=make_predictor("auto"))

The latencies come from a `nasutil.predictor.Predictor` the caller passes in (the predictor sits in a layer
above this one); loads without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nasutil.colocate.packing import Group, estimated_memory_bytes, pack_by_latency
from nasutil.evaluator.dtypes import element_size
from nasutil.registry import get_space

if TYPE_CHECKING:
    from nasutil.evaluator import Candidate, MeasureConfig

GIB = 2**30


def memory_bytes(candidates: Sequence[Candidate], config: MeasureConfig) -> list[float]:
    """Each network's estimated device memory for inference at the config's batch size, dtype and input size
    (from its op listing: `packing.estimated_memory_bytes`)."""
    out = []
    for c in candidates:
        space = get_space(c.space)
        ops = space.operators(space.parse(c.arch), input_size=config.input_size)
        out.append(estimated_memory_bytes(ops, config.batch_size, element_size(config.dtype)))
    return out


def over_budget(candidates: Sequence[Candidate], config: MeasureConfig, memory_budget_gb: float, *,
                at_batch: bool = False) -> str | None:
    """None where the whole group fits in `memory_budget_gb` GiB, else the sentence that says it does not
    (naming the config's batch size where `at_batch`)."""
    needed = sum(memory_bytes(candidates, config))
    if needed <= memory_budget_gb * GIB:
        return None
    at = f" at batch {config.batch_size}" if at_batch else ""
    return f"the group needs about {needed / GIB:.3f} GiB{at}, over the memory budget of {memory_budget_gb} GiB"


def predicted_latency_ms(candidates: Sequence[Candidate], config: MeasureConfig, predictor: Any) -> list[float]:
    """Each candidate's latency, predicted by `predictor` (a `nasutil.predictor.Predictor`) on its profile's
    device at the config's dtype (fp16 for fp32) and batch size, from CUDA graphs: only the order matters for
    packing, so a CPU run packs by the GPU's figures. The candidates are of one space."""
    if not candidates:
        return []
    target = predictor.target(config.dtype if config.dtype != "fp32" else "fp16", config.batch_size, "cudagraph")
    return [p.latency_ms for p in predictor.predict_many(candidates[0].space, [c.arch for c in candidates], target)]


def plan_groups(candidates: Sequence[Candidate], config: MeasureConfig, group_size: int,
                memory_budget_gb: float | None, predictor: Any) -> list[Group]:
    """Groups of at most `group_size` candidates of similar predicted latency (by `predictor`), each within
    the memory budget where one is given; `Group.members` index `candidates`. A NasutilError where one
    candidate alone needs more than the budget."""
    memory = memory_bytes(candidates, config)
    budget = None if memory_budget_gb is None else memory_budget_gb * GIB
    return pack_by_latency(predicted_latency_ms(candidates, config, predictor), group_size, memory, budget)
