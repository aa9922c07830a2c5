"""Execution modes: turn a module and a static input into a zero-argument callable.

- eager: plain PyTorch dispatch, one kernel launch per op (launch-bound for small nets);
- cudagraph: capture one forward in a CUDA graph, time its replay;
- compile: `torch.compile` (Inductor, default mode); compilation is part of the prepare phase.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn

from nasutil.errors import NasutilError


@dataclass
class PreparedRun:
    fn: Callable[[], object]
    keep: object = None  # what must outlive the run (the captured graph)


def prepare(model: nn.Module, x: torch.Tensor, mode: str, *, warm_up: bool = True,
            retry_with_warm_up: bool = True) -> PreparedRun:
    """Must be called under `torch.inference_mode()` or `torch.no_grad()`.

    warm_up=False captures a CUDA graph without running the model eagerly first, so that no kernel
    runs on the device (capture only records); right only in a process whose library handles and
    workspaces already exist. A capture that fails without warm-up is retried with it, unless
    `retry_with_warm_up` is False: then its error is raised (a caller outside its turn on the device
    retries inside it)."""
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
                if not retry_with_warm_up:
                    raise
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
        check_compiled_code_cache()
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


_log = logging.getLogger(__name__)


def cut_off_libraries(folder: Path) -> list[Path]:
    """The shared libraries under `folder` that end before their own section table does (or hold no ELF
    header at all): what a compile killed while writing one leaves behind."""
    broken = []
    for path in folder.rglob("*.so"):
        try:
            with path.open("rb") as fh:
                header = fh.read(64)
            size = path.stat().st_size
        except OSError:
            continue
        if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2:  # not a whole 64-bit ELF header
            broken.append(path)
            continue
        order = "<" if header[5] == 1 else ">"
        (table,) = struct.unpack_from(order + "Q", header, 0x28)
        entry, count = struct.unpack_from(order + "HH", header, 0x3A)
        if table + entry * count > size:
            broken.append(path)
    return broken


@functools.cache
def check_compiled_code_cache() -> int:
    """Once per process, before its first compile: remove the cut-off libraries from Inductor's cache.
    Inductor finds a library by its key and loads it, so one left cut off by an interrupted compile
    failed every later compile of that network ("file too short"); removed, it is compiled again.
    Returns how many were removed."""
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir

        folder = Path(cache_dir())
    except (ImportError, OSError):  # another torch: its default place
        folder = Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_" + os.environ.get("USER", "")))
    if not folder.is_dir():
        return 0
    removed = 0
    for path in cut_off_libraries(folder):
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
    if removed:
        _log.warning("removed %d cut-off compiled librar%s from Inductor's cache %s (left by an interrupted "
                     "compile); they are compiled again", removed, "y" if removed == 1 else "ies", folder)
    return removed
