"""Measured peak FLOP/s: a large GEMM microbenchmark per device and dtype."""

from __future__ import annotations

import functools

import torch

from nasutil.evaluator.dtypes import matmul_precision, torch_dtype
from nasutil.evaluator.timing import time_windows


@functools.lru_cache(maxsize=None)
def measured_peak_tflops(device: str, dtype: str) -> float:
    """Dense GEMM throughput: 8192^3 on GPU, 1024^3 on CPU (fp32 math for CPU half types)."""
    dev = torch.device(device)
    n = 8192 if dev.type == "cuda" else 1024
    tdtype = torch_dtype(dtype)
    if dev.type == "cpu" and tdtype in (torch.float16, torch.bfloat16):
        tdtype = torch.float32  # CPUs have no fast dense half GEMM to speak of
    with matmul_precision(dtype):
        a = torch.randn(n, n, device=dev, dtype=tdtype)
        b = torch.randn(n, n, device=dev, dtype=tdtype)
        # a long warm-up lets the clocks ramp up before the timed windows
        timing = time_windows(lambda: torch.mm(a, b), dev, warmup=20, repeats=5, min_window_ms=50.0, max_iters=50)
    return 2 * n**3 / (timing.median_ms * 1e-3) / 1e12
