"""Execution modes: turn a module and a static input into a zero-argument callable.

- eager: plain PyTorch dispatch, one kernel launch per op (launch-bound for small nets);
- cudagraph: capture one forward in a CUDA graph, time its replay;
- compile: `torch.compile` (Inductor, default mode); compilation is part of the prepare phase.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn as nn

from nasutil.errors import NasutilError


@dataclass
class PreparedRun:
    fn: Callable[[], object]
    keep: object = None  # what must outlive the run (the captured graph)


def prepare(model: nn.Module, x: torch.Tensor, mode: str, *, warm_up: bool = True) -> PreparedRun:
    """Must be called under `torch.inference_mode()` or `torch.no_grad()`.

    warm_up=False captures a CUDA graph without running the model eagerly first, so that no kernel
    runs on the device (capture only records); right only in a process whose library handles and
    workspaces already exist. A capture that fails without warm-up is retried with it."""
    if mode == "eager":
        return PreparedRun(lambda: model(x))
    if mode == "cudagraph":
        if x.device.type != "cuda":
            raise NasutilError("mode 'cudagraph' needs a CUDA device (use eager or compile on CPU)")
        if not warm_up:
            try:
                return PreparedRun(*_capture(model, x))
            except RuntimeError:
                torch.cuda.synchronize(x.device)
        side = torch.cuda.Stream(device=x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up on a side stream, as capture requires
                model(x)
        torch.cuda.current_stream(x.device).wait_stream(side)
        return PreparedRun(*_capture(model, x))
    if mode == "compile":
        # Each candidate is a new graph: without a reset, Dynamo's recompile limit would quietly
        # fall back to eager after a few candidates in one worker.
        torch._dynamo.reset()
        compiled = torch.compile(model, dynamic=False)
        compiled(x)  # triggers compilation
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
        return PreparedRun(lambda: compiled(x), compiled)
    raise NasutilError(f"unknown mode {mode!r}")


def _capture(model: nn.Module, x: torch.Tensor) -> tuple[Callable[[], object], torch.cuda.CUDAGraph]:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(x)
    torch.cuda.synchronize(x.device)
    return graph.replay, graph
