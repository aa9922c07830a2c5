"""Run several candidate networks on one device at once.

A NAS candidate uses a few percent of a modern GPU; run one at a time, the rest sits idle. `colocate`
prepares a group of networks to run together by a strategy (`sequential`, `streams`, `fused`: see
`nasutil.colocate.strategies`); a strategy that cannot apply to a group says why and falls back to
`sequential`; `compiled=True` compiles each network by Inductor first (`nasutil.colocate.compiled`).
`measure_group` times a group against `sequential` in the same run. `plan_groups` packs candidates into
groups of similar predicted latency within a memory budget (`nasutil.colocate.planning`). `Population`
trains candidates together, each from its own thread (a search's trials).

    from nasutil.colocate import colocate
    group = colocate(models, batch, "streams")   # models and batch on the GPU, models in eval mode
    outputs = group.run()                        # one output per model
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasutil.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from nasutil.colocate.engine import CoLocated, check_strategy, colocate
    from nasutil.colocate.measure import (GroupMeasurement, measure_group, measure_group_in_process,
                                          measure_group_isolated)
    from nasutil.colocate.packing import Group
    from nasutil.colocate.planning import memory_bytes, over_budget, plan_groups, predicted_latency_ms
    from nasutil.colocate.population import Member, Population
    from nasutil.colocate.strategies import STRATEGIES, Strategy, register_strategy

__all__ = ["CoLocated", "Group", "GroupMeasurement", "Member", "Population", "STRATEGIES", "Strategy", "check_strategy",
           "colocate", "measure_group", "measure_group_in_process", "measure_group_isolated", "memory_bytes",
           "over_budget", "plan_groups", "predicted_latency_ms", "register_strategy"]

# Each name is imported on first use, so that reading a setting does not import torch.
__getattr__, __dir__ = lazy_attributes(__name__, {
    'CoLocated': 'nasutil.colocate.engine',
    'check_strategy': 'nasutil.colocate.engine',
    'colocate': 'nasutil.colocate.engine',
    'GroupMeasurement': 'nasutil.colocate.measure',
    'measure_group': 'nasutil.colocate.measure',
    'measure_group_in_process': 'nasutil.colocate.measure',
    'measure_group_isolated': 'nasutil.colocate.measure',
    'Group': 'nasutil.colocate.packing',
    'memory_bytes': 'nasutil.colocate.planning',
    'over_budget': 'nasutil.colocate.planning',
    'plan_groups': 'nasutil.colocate.planning',
    'predicted_latency_ms': 'nasutil.colocate.planning',
    'Member': 'nasutil.colocate.population',
    'Population': 'nasutil.colocate.population',
    'STRATEGIES': 'nasutil.colocate.strategies',
    'Strategy': 'nasutil.colocate.strategies',
    'register_strategy': 'nasutil.colocate.strategies',
})
