"""Time single operators on a device: the measurements an operator table is made of.

Each op is built as the module (or element-wise expression) a network would run, in
the evaluator's layout (channels_last) and dtype, on a batch of the target's size.
`eager` times a Python loop of calls, so the per-call launch cost a network pays in
eager mode is part of the op's time; `cudagraph` captures a loop of calls into one
CUDA graph and times its replay, leaving only the kernels and the gaps between them.
Repeating the op enough times that a window lasts >= `min_window_us` keeps the
timer's resolution out of the result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
import torch.nn as nn

from nasutil.evaluator.dtypes import torch_dtype
from nasutil.op_tracing import ACTIVATIONS
from nasutil.ops import Op
from nasutil.predictor.op_tables import OperatorTable
from nasutil.predictor.prediction import PredictTarget

_ACTIVATION_BY_NAME = {cls.__name__.lower(): cls for cls in ACTIVATIONS}


def _padding(op: Op) -> int:
    """The symmetric padding that turns the op's input size into its output size."""
    return max(0, ((op.h_out - 1) * op.stride + op.reach - op.h_in + 1) // 2)


def op_callable(op: Op, batch: int, device: torch.device, dtype: torch.dtype,
                channels_last: bool = True) -> Callable[[], torch.Tensor]:
    """A zero-argument function that runs `op` once on a fixed batch."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format

    def tensor(c: int, h: int, w: int) -> torch.Tensor:
        t = torch.randn(batch, c, h, w, device=device, dtype=dtype)
        return t.contiguous(memory_format=fmt) if h * w > 1 else t

    x = tensor(op.c_in, op.h_in, op.w_in)
    module: nn.Module | None = None
    if op.family in ("conv", "dwconv", "gconv"):
        module = nn.Conv2d(op.c_in, op.c_out, op.kernel, op.stride, _padding(op), dilation=op.dilation,
                           groups=op.groups, bias=op.bias)
    elif op.family == "linear":
        x = torch.randn(batch, op.c_in, device=device, dtype=dtype)
        module = nn.Linear(op.c_in, op.c_out, bias=op.bias)
    elif op.family == "norm":
        module = nn.BatchNorm2d(op.c_in, affine=op.bias)
    elif op.family == "act":
        module = _ACTIVATION_BY_NAME.get(op.variant, nn.ReLU)()
    elif op.family == "pool":
        pool = nn.MaxPool2d if op.variant == "max" else nn.AvgPool2d
        kwargs = {} if op.variant == "max" else {"count_include_pad": False}
        module = pool(op.kernel, op.stride, _padding(op), **kwargs)
    elif op.family == "gpool":
        module = nn.AdaptiveMaxPool2d(1) if op.variant == "max" else nn.AdaptiveAvgPool2d(1)
    if module is not None:
        module = module.to(device=device, dtype=dtype).eval()
        if channels_last and op.family != "linear":
            module = module.to(memory_format=fmt)
        return lambda: module(x)
    if op.family == "add":
        y = tensor(op.c_in, op.h_in, op.w_in)
        return lambda: x + y
    if op.family == "mul":
        y = tensor(op.c_in, 1, 1) if op.variant == "broadcast" else tensor(op.c_in, op.h_in, op.w_in)
        return lambda: x * y
    if op.family == "cat":
        half = tensor(max(1, op.c_in // 2), op.h_in, op.w_in)
        return lambda: torch.cat([half, half], dim=1)
    return lambda: x * 0.0  # scale, and the element-wise "other" ops


def _time_eager(fn: Callable[[], object], reps: int, device: torch.device) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / reps


def _time_graph(fn: Callable[[], object], reps: int, device: torch.device, windows: int) -> list[float]:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize(device)
    out = []
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / reps)
    del graph
    return out


def time_op_us(op: Op, target: PredictTarget, device: torch.device, *, min_window_us: float = 300.0,
               windows: int = 5, max_reps: int = 200) -> float:
    """Median time of one call of `op` at the target's batch, dtype and mode, in microseconds."""
    dtype = torch_dtype(target.dtype)
    with torch.inference_mode():
        fn = op_callable(op, target.batch_size, device, dtype)
        if target.mode == "cudagraph":
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):
                for _ in range(3):
                    fn()
            torch.cuda.current_stream(device).wait_stream(side)
        else:
            for _ in range(3):
                fn()
        single = _time_eager(fn, 3, device)
        reps = int(min(max_reps, max(3, min_window_us / max(single, 1.0))))
        if target.mode == "cudagraph":
            samples = _time_graph(fn, reps, device, windows)
        else:
            samples = [_time_eager(fn, reps, device) for _ in range(windows)]
    samples.sort()
    return samples[len(samples) // 2]


def time_ops(ops: Iterable[Op], target: PredictTarget, device: str | torch.device = "cuda",
             progress: Callable[[], None] | None = None) -> dict[Op, float]:
    """Time every distinct op; ops that fail (out of memory, say) are left out."""
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError("operator timing needs a CUDA device")
    times: dict[Op, float] = {}
    for op in dict.fromkeys(ops):
        try:
            times[op] = time_op_us(op, target, device)
        except (RuntimeError, torch.cuda.OutOfMemoryError):
            torch.cuda.empty_cache()
        if progress:
            progress()
    return times


def measure_tables(ops: list[Op], targets: list[PredictTarget], device: str = "cuda",
                   progress: Callable[[], None] | None = None) -> list[OperatorTable]:
    """One table per target, each op timed at the target's batch, dtype and mode."""
    tables = []
    for target in targets:
        times = time_ops(ops, target, device, progress=progress)
        tables.append(OperatorTable(target.dtype, target.batch_size, target.mode, times))
    return tables
