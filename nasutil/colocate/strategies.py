"""Ways to run several networks on one device: each says whether it applies to a group, and prepares it.

- sequential: one network after another (on a GPU, each from its own CUDA graph): time-only
  multiplexing, the baseline every other strategy is measured against;
- streams: every network on its own CUDA stream, all captured in one CUDA graph, so that their kernels
  can run side by side (space-time multiplexing);
- fused: horizontal fusion, one kernel per op for the whole group. Shape-identical networks run as
  one with their weights stacked and the forward pass vectorised by `torch.func.vmap`; networks that
  differ run as one where their class offers it (see `Fusable`: NAS-Bench-201 cells do).

More come from installed packages, through the entry-point group `nasutil.colocate_strategies` (a name
and a `Strategy` subclass that builds without arguments, or an instance), or from `register_strategy`
at run time. `available()` lists them all.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn as nn

from nasutil.plugins import Registry, class_path

Runner = Callable[[], list[torch.Tensor]]


@dataclass
class Prepared:
    """A group ready to run: `run()` runs every network once and returns their outputs, in order."""

    run: Runner
    keep: object = None  # what must outlive the runner (graphs, streams, stacked weights)


class Strategy(ABC):
    name: str
    #: raised when what the strategy runs for some group changes, so that group results cached under an
    #: older version are measured again rather than read back
    version: int = 1
    #: whether the strategy runs the networks it is given as they are, so that they may be compiled ones
    runs_compiled: bool = True

    @property
    def cache_name(self) -> str:
        """The strategy as group results are cached under it."""
        return self.name if self.version == 1 else f"{self.name}@v{self.version}"

    def why_not(self, models: Sequence[nn.Module], inputs: Sequence[torch.Tensor]) -> str | None:
        """Why this strategy cannot run this group, or None where it can."""
        return None

    @abstractmethod
    def prepare(self, models: Sequence[nn.Module], inputs: Sequence[torch.Tensor]) -> Prepared:
        """Called under `torch.inference_mode()`, with models and inputs on the device."""


def _on_cuda(inputs: Sequence[torch.Tensor]) -> bool:
    return all(x.device.type == "cuda" for x in inputs)


def _warm_up(models: Sequence[nn.Module], inputs: Sequence[torch.Tensor]) -> None:
    """Run each network twice on a side stream, as CUDA-graph capture requires."""
    side = torch.cuda.Stream(device=inputs[0].device)
    side.wait_stream(torch.cuda.current_stream(inputs[0].device))
    with torch.cuda.stream(side):
        for model, x in zip(models, inputs):
            for _ in range(2):
                model(x)
    torch.cuda.current_stream(inputs[0].device).wait_stream(side)


class Sequential(Strategy):
    name = "sequential"

    def prepare(self, models, inputs):
        if not _on_cuda(inputs):
            return Prepared(lambda: [model(x) for model, x in zip(models, inputs)])
        _warm_up(models, inputs)
        graphs, outputs = [], []
        for model, x in zip(models, inputs):
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                outputs.append(model(x))
            graphs.append(graph)
        torch.cuda.synchronize(inputs[0].device)

        def run() -> list[torch.Tensor]:
            for graph in graphs:
                graph.replay()
            return outputs

        return Prepared(run, graphs)


class Streams(Strategy):
    name = "streams"

    def why_not(self, models, inputs):
        return None if _on_cuda(inputs) else "streams needs a CUDA device"

    def prepare(self, models, inputs):
        device = inputs[0].device
        _warm_up(models, inputs)
        streams = [torch.cuda.Stream(device=device) for _ in models]
        graph, outputs = torch.cuda.CUDAGraph(), []
        with torch.cuda.graph(graph):
            main = torch.cuda.current_stream(device)
            # Fork every stream before any network is enqueued: torch hands streams out from a small
            # pool, so one of them can be the capture stream itself, and a fork taken after a network
            # was enqueued there would make every later network wait for it.
            for stream in streams:
                stream.wait_stream(main)
            for stream, model, x in zip(streams, models, inputs):
                with torch.cuda.stream(stream):
                    outputs.append(model(x))
            for stream in streams:
                main.wait_stream(stream)  # join before the capture ends
        torch.cuda.synchronize(device)

        def run() -> list[torch.Tensor]:
            graph.replay()
            return outputs

        return Prepared(run, (graph, streams))


def structure(model: nn.Module) -> tuple:
    """What must be equal for two networks to run as one: module types in order, and every
    parameter's and buffer's name, shape and dtype."""
    return (tuple(type(m).__name__ for m in model.modules()),
            tuple((n, tuple(t.shape), t.dtype) for n, t in model.named_parameters()),
            tuple((n, tuple(t.shape), t.dtype) for n, t in model.named_buffers()))


class Fusable(Protocol):
    """A network class whose instances can run as one though their weights differ in shape (a space's
    candidates of one skeleton). `fuse` returns a module that takes one input per network (or the one
    shared by all) and returns one output per network."""

    @classmethod
    def fusion_obstacle(cls, networks: Sequence[nn.Module]) -> str | None: ...

    @classmethod
    def fuse(cls, networks: Sequence[nn.Module], shared_input: bool) -> nn.Module: ...


def _fusable_class(models: Sequence[nn.Module]) -> type | None:
    kind = type(models[0])
    return kind if callable(getattr(kind, "fuse", None)) and callable(getattr(kind, "fusion_obstacle", None)) else None


class Fused(Strategy):
    name = "fused"
    version = 2  # 2: NAS-Bench-201 cells that differ are fused, not run one after another
    runs_compiled = False

    def why_not(self, models, inputs):
        if len({(tuple(x.shape), x.dtype) for x in inputs}) > 1:
            return "fused needs inputs of one shape and dtype"
        if any(m.training for m in models):
            return "fused runs networks in eval mode only"
        if len({structure(m) for m in models}) == 1:
            return None
        kind = _fusable_class(models)
        if kind is None:
            return ("fused needs shape-identical candidates (same modules, weight shapes and dtypes), "
                    f"or networks whose class can fuse them ({type(models[0]).__name__} cannot)")
        return kind.fusion_obstacle(models)

    def prepare(self, models, inputs):
        shared = all(x is inputs[0] for x in inputs)
        if len({structure(m) for m in models}) == 1:
            eager = self._vectorised(models, inputs, shared)
        else:
            eager = self._fused_by_class(models, inputs, shared)
        if not _on_cuda(inputs):
            return Prepared(eager[0], eager[1])
        run, keep = eager
        device = inputs[0].device
        side = torch.cuda.Stream(device=device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                run()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = run()
        torch.cuda.synchronize(device)

        def replay() -> list[torch.Tensor]:
            graph.replay()
            return outputs

        return Prepared(replay, (graph, keep))

    @staticmethod
    def _fused_by_class(models, inputs, shared: bool) -> tuple[Runner, object]:
        first = models[0]
        reference = next(first.parameters(), None)
        fused = _fusable_class(models).fuse(models, shared)
        if reference is not None:
            fused = fused.to(device=reference.device, dtype=reference.dtype)
        if inputs[0].dim() == 4 and inputs[0].is_contiguous(memory_format=torch.channels_last):
            fused = fused.to(memory_format=torch.channels_last)
        batch = inputs[0] if shared else list(inputs)
        return (lambda: fused(batch)), fused

    @staticmethod
    def _vectorised(models, inputs, shared: bool) -> tuple[Runner, object]:
        from torch.func import functional_call, stack_module_state

        params, buffers = stack_module_state(list(models))
        template = copy.deepcopy(models[0]).to("meta")
        batch = inputs[0] if shared else torch.stack(list(inputs))

        def one(p, b, x):
            return functional_call(template, (p, b), (x,))

        vectorised = torch.vmap(one, in_dims=(0, 0, None if shared else 0))

        def eager() -> list[torch.Tensor]:
            return list(vectorised(params, buffers, batch).unbind(0))

        return eager, (params, buffers, template)


#: the built-in strategies, by name
STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Sequential(), Streams(), Fused())}

#: the entry-point group through which an installed package offers strategies
ENTRY_POINT_GROUP = "nasutil.colocate_strategies"


def _accept(value: object, name: str) -> Strategy:
    strategy = value() if isinstance(value, type) else value
    if not isinstance(strategy, Strategy):
        raise TypeError("it is not a nasutil.colocate.Strategy")
    return strategy


REGISTRY: Registry[Strategy] = Registry(
    ENTRY_POINT_GROUP, "strategy", _accept, owner=__name__, builtin=STRATEGIES,
    path_of=lambda strategy: class_path(type(strategy)), unknown="unknown {kind} {name!r} (choose from {known})",
    rebuild_hint="its class must be importable and take no arguments")


def available() -> dict[str, Strategy]:
    """The built-in strategies, those installed packages offer, and those registered in this process."""
    return REGISTRY.items()


def strategy_named(name: str) -> Strategy:
    """The strategy called `name`; a one-line error for an unknown one (naming the others) or a broken one."""
    return REGISTRY.get(name)


def register_strategy(strategy: Strategy) -> None:
    """Make `strategy` available by its name to `colocate` and `nasutil colocate --strategy`. A worker
    process (`measure_group_isolated`) repeats the registration by building the strategy's class again
    without arguments: that class must be importable (not defined in `__main__` or in a function) and take
    none, else asking the worker for it says it could not rebuild it."""
    REGISTRY.register(getattr(strategy, "name", repr(strategy)), strategy)


def registered_paths(names: Sequence[str] | None = None) -> dict[str, str]:
    """Strategies registered at run time (those among `names`, where given), as `module:qualname` of their
    classes, for worker processes."""
    return {name: path for name, path in REGISTRY.runtime_paths().items()
            if path and (names is None or name in names)}


def register_path(name: str, path: str) -> None:
    """Import `module:qualname`, build it, and register it under `name` (the worker side of `registered_paths`)."""
    REGISTRY.register_path(name, path)
