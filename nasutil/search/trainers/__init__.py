"""Trainers: how a surviving candidate gets its accuracy (a table lookup or real training)."""

from __future__ import annotations

from typing import Any

from nasutil.errors import NasutilError
from nasutil.search.trainers.base import Reporter, Trainer, TrainResult

__all__ = ["Reporter", "Trainer", "TrainResult", "make_trainer"]


def make_trainer(cfg: dict[str, Any], seed: int = 0) -> Trainer:
    """The trainer named by the `trainer` config group."""
    params = dict(cfg)
    name = params.pop("name", None)
    if name == "tabular":
        from nasutil.search.trainers.tabular import TabularTrainer

        return TabularTrainer(**_known(TabularTrainer, params, name))
    if name == "torch":
        from nasutil.search.trainers.torch_trainer import TorchTrainer

        return TorchTrainer(**_known(TorchTrainer, params, name), seed=seed)
    raise NasutilError(f"unknown trainer {name!r} (choose from tabular, torch)")


def _known(cls: type, params: dict[str, Any], name: str) -> dict[str, Any]:
    import inspect

    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "seed"}
    unknown = sorted(set(params) - accepted)
    if unknown:
        raise NasutilError(f"trainer {name!r} takes no option {', '.join(unknown)} "
                           f"(takes: {', '.join(sorted(accepted))})")
    return params
