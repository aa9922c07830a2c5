"""Execution modes: turn a module and a static input into a zero-argument callable.

- eager: plain PyTorch dispatch, one kernel launch per op (launch-bound for small nets);
- cudagraph: capture one forward in a CUDA graph, time its replay;
- compile: `torch.compile` (Inductor, default mode); compile time is recorded apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from nasutil.errors import NasutilError


@dataclass
class PreparedRun:
    fn: Callable[[], object]
    setup_s: float
    notes: dict[str, object] = field(default_factory=dict)


def prepare(model: nn.Module, x: torch.Tensor, mode: str) -> PreparedRun:
    """Must be called under `torch.inference_mode()` or `torch.no_grad()`."""
    t0 = time.perf_counter()
    if mode == "eager":
        return PreparedRun(lambda: model(x), time.perf_counter() - t0)
    if mode == "cudagraph":
        if x.device.type != "cuda":
            raise NasutilError("mode 'cudagraph' needs a CUDA device (use eager or compile on CPU)")
        side = torch.cuda.Stream(device=x.device)
        side.wait_stream(torch.cuda.current_stream(x.device))
        with torch.cuda.stream(side):
            for _ in range(2):  # warm-up on a side stream, as capture requires
                model(x)
        torch.cuda.current_stream(x.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            model(x)
        torch.cuda.synchronize(x.device)
        return PreparedRun(graph.replay, time.perf_counter() - t0, {"graph": graph})
    if mode == "compile":
        compiled = torch.compile(model, dynamic=False)
        compiled(x)  # triggers compilation
        if x.device.type == "cuda":
            torch.cuda.synchronize(x.device)
        return PreparedRun(lambda: compiled(x), time.perf_counter() - t0)
    raise NasutilError(f"unknown mode {mode!r}")
