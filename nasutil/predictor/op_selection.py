"""Which ops an operator table should hold: those the profile's spaces use, within a budget.

The ops come from networks sampled from the spaces the profile is for, so the table
covers the shapes those spaces use; where a space has more distinct ops than the
budget allows, ops are taken round-robin over their kinds (family, kernel, stride,
variant) so that every kind is measured and the rest are interpolated.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from nasutil.ops import Op
from nasutil.registry import get_space


def sampled_ops(space_names: Iterable[str], networks: int, seed: int = 0,
                input_size: int | None = None) -> list[Op]:
    """Distinct ops of `networks` sampled archs per space, in first-seen order."""
    seen: dict[Op, None] = {}
    for name in space_names:
        space = get_space(name)
        for arch in space.sample_many(networks, seed):
            seen.update(dict.fromkeys(space.operators(arch, input_size=input_size)))
    return list(seen)


def select_ops(ops: list[Op], limit: int, seed: int = 0) -> list[Op]:
    """At most `limit` ops, round-robin over kinds so that rare kinds are all kept."""
    if len(ops) <= limit:
        return list(ops)
    rng = np.random.default_rng(seed)
    kinds: dict[tuple, list[Op]] = defaultdict(list)
    for op in ops:
        kinds[(op.family, op.kernel, op.stride, op.variant, op.dilation)].append(op)
    queues = [list(rng.permutation(len(members))) for members in kinds.values()]
    members = list(kinds.values())
    chosen: list[Op] = []
    while len(chosen) < limit:
        for queue, group in zip(queues, members):
            if queue and len(chosen) < limit:
                chosen.append(group[queue.pop()])
    return chosen
