"""Run a group of networks on one device by a chosen strategy, falling back where it cannot apply."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn

from nasutil.colocate.strategies import Prepared, Runner, strategy_named
from nasutil.errors import NasutilError


@dataclass
class CoLocated:
    """A prepared group: `run()` runs every network once and returns their outputs in order. On a GPU the
    outputs are the graph's static tensors, overwritten by the next run."""

    strategy: str  # the strategy that runs the group
    requested: str
    fallback_reason: str | None  # why `requested` could not run it, where it fell back
    prepared: Prepared
    compiled: bool = False  # each network compiled by Inductor before the strategy prepared it

    @property
    def run(self) -> Runner:
        return self.prepared.run


def check_strategy(name: str) -> None:
    """A one-line NasutilError for a strategy that is unknown (naming the others) or cannot be loaded."""
    strategy_named(name)


def _networks(models: object) -> list[nn.Module]:
    """The group as a list of networks: one network alone (a common slip) or anything else in the list fails
    here in one line, not inside a strategy or at the first run."""
    if isinstance(models, nn.Module) and not isinstance(models, nn.ModuleList):
        raise NasutilError(f"models must be a list of networks, got one {type(models).__name__} (give [model])")
    if isinstance(models, str) or not isinstance(models, (Sequence, nn.ModuleList)):
        raise NasutilError(f"models must be a list of networks, got {type(models).__name__}")
    if not models:
        raise NasutilError("co-location needs at least one network")
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise NasutilError(f"models[{i}] must be a network (an nn.Module), got {type(model).__name__}")
    return list(models)


def _inputs(inputs: object, count: int) -> list[torch.Tensor]:
    """One input per network: `inputs` itself where it is one tensor (shared by all), else its items."""
    if isinstance(inputs, torch.Tensor):
        return [inputs] * count
    if isinstance(inputs, str) or not isinstance(inputs, Sequence):
        raise NasutilError(f"inputs must be a tensor shared by every network or a list of one per network, "
                           f"got {type(inputs).__name__}")
    if len(inputs) != count:
        raise NasutilError(f"{count} networks but {len(inputs)} inputs")
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise NasutilError(f"inputs[{i}] must be a torch.Tensor, got {type(x).__name__}")
    return list(inputs)


def _check_devices(models: list[nn.Module], inputs: list[torch.Tensor]) -> None:
    """Each network on its input's device: a mismatch failed inside a strategy with a device error from
    deep in torch, after the others had been prepared."""
    for i, (model, x) in enumerate(zip(models, inputs)):
        weight = next(itertools.chain(model.parameters(), model.buffers()), None)
        if weight is not None and weight.device != x.device:
            raise NasutilError(f"models[{i}] is on {weight.device} but its input on {x.device}: "
                               f"put both on one device")


def colocate(models: Sequence[nn.Module], inputs: torch.Tensor | Sequence[torch.Tensor], strategy: str = "streams",
             *, fallback: bool = True, compiled: bool = False, freezing: bool = False,
             progress: Callable[[int, int, float], None] | None = None) -> CoLocated:
    """Prepare `models` (on the device, in eval mode) to run together on `inputs` (one tensor shared by all,
    or one per model). A strategy that cannot apply falls back to `sequential`, saying why, or with
    fallback=False raises that reason as a NasutilError.

    compiled=True compiles each network by Inductor first (`nasutil.colocate.compiled`; seconds per network,
    `progress(done, total, seconds)` after each), for the strategies that run the networks as they are;
    freezing=True folds the weights into the compiled networks (`compile_for_inference`)."""
    check_strategy(strategy)
    models = _networks(models)
    inputs = _inputs(inputs, len(models))
    _check_devices(models, inputs)
    for name, value in (("fallback", fallback), ("compiled", compiled), ("freezing", freezing)):
        if not isinstance(value, bool):
            raise NasutilError(f"{name} must be True or False, got {value!r}")
    if progress is not None and not callable(progress):
        raise NasutilError(f"progress must be a function (done, total, seconds) or None, got {progress!r}")
    requested = strategy_named(strategy)
    reason = requested.why_not(models, inputs)
    if reason is None and compiled and not requested.runs_compiled:
        reason = f"{strategy} builds its own networks and does not run compiled ones"
    if reason is not None and not fallback:
        raise NasutilError(f"strategy {strategy!r} does not apply: {reason}")
    chosen = strategy if reason is None else "sequential"
    with torch.inference_mode():
        if compiled:
            from nasutil.colocate.compiled import compile_for_inference

            models = compile_for_inference(models, inputs, progress, freezing=freezing)
        prepared = strategy_named(chosen).prepare(models, inputs)
    return CoLocated(chosen, strategy, reason, prepared, compiled)
