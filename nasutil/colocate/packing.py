"""Form co-location groups from predictions, before anything runs.

A group run together finishes when its slowest member does (every member runs once per run), so a fast
network grouped with a slow one waits. Sorting candidates by predicted latency and cutting the order
into consecutive groups puts networks of similar latency together; for a fixed group size this
minimises the sum of the groups' slowest latencies, which bounds the time to run every candidate
once. A memory budget closes a group early. The predicted figures come from `nasutil.predictor`; the
memory estimate from the op listing (weights, and every op's output kept for the backward pass when
training).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from nasutil.errors import NasutilError
from nasutil.ops import Op


@dataclass(frozen=True)
class Group:
    members: tuple[int, ...]  # indices into the candidates given
    predicted_latency_ms: float  # the slowest member's: what a run of the group waits for
    predicted_memory_bytes: float


def estimated_memory_bytes(ops: Sequence[Op], batch_size: int, dtype_bytes: int = 2, *, training: bool = False) -> float:
    """A network's device memory: its weights, plus for inference the largest op output (twice: input
    and output live together), or for training every op's output (autograd keeps them) and fp32
    weights, gradients and momentum."""
    params = sum(op.params for op in ops)
    outputs = [op.c_out * op.h_out * op.w_out * batch_size for op in ops]
    if training:
        return 3 * 4 * params + dtype_bytes * sum(outputs)
    return dtype_bytes * (params + 2 * max(outputs, default=0))


def pack_by_latency(latency_ms: Sequence[float], group_size: int, memory_bytes: Sequence[float] | None = None,
                    memory_budget_bytes: float | None = None) -> list[Group]:
    """Groups of at most `group_size` candidates of similar predicted latency, each within the memory
    budget (where one is given). Raises NasutilError where one candidate alone exceeds the budget."""
    if group_size < 1:
        raise NasutilError(f"a group needs at least one member, got a group size of {group_size}")
    memory = list(memory_bytes) if memory_bytes is not None else [0.0] * len(latency_ms)
    if len(memory) != len(latency_ms):
        raise NasutilError(f"{len(latency_ms)} latencies but {len(memory)} memory estimates")
    if memory_budget_bytes is not None:
        biggest = max(range(len(memory)), key=memory.__getitem__, default=None)
        if biggest is not None and memory[biggest] > memory_budget_bytes:
            raise NasutilError(f"the memory budget of {_size(memory_budget_bytes)} is too small for one candidate "
                               f"(candidate {biggest} needs about {_size(memory[biggest])})")
    order = sorted(range(len(latency_ms)), key=lambda i: (latency_ms[i], i))
    groups, current = [], []
    for i in order:
        over = memory_budget_bytes is not None and sum(memory[j] for j in current) + memory[i] > memory_budget_bytes
        if current and (len(current) == group_size or over):
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return [_group(g, latency_ms, memory) for g in groups]


def random_groups(count: int, group_size: int, seed: int, latency_ms: Sequence[float] | None = None) -> list[Group]:
    """The baseline: the same group sizes, members drawn at random."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    latency = latency_ms if latency_ms is not None else [0.0] * count
    return [_group(order[k:k + group_size], latency, [0.0] * count) for k in range(0, count, group_size)]


def _group(members: Sequence[int], latency_ms: Sequence[float], memory: Sequence[float]) -> Group:
    return Group(tuple(members), max(latency_ms[i] for i in members), float(sum(memory[i] for i in members)))


def _size(n: float) -> str:
    if n >= 2**29:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**20:.2g} MiB"  # a tiny budget is not "0.0 MiB"
