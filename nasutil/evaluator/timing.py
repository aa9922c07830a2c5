"""Repeated timed windows after warm-up: CUDA events on GPU, perf_counter on CPU."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Timing:
    """Per-iteration latency (ms) of each timed window."""

    window_ms: tuple[float, ...]
    iters_per_window: int

    @property
    def median_ms(self) -> float:
        return statistics.median(self.window_ms)

    @property
    def cv(self) -> float:
        mean = statistics.fmean(self.window_ms)
        return statistics.pstdev(self.window_ms) / mean if mean > 0 else math.inf

    @property
    def iqr_ms(self) -> float:
        q = statistics.quantiles(self.window_ms, n=4, method="inclusive")
        return q[2] - q[0]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once_ms(fn: Callable[[], object], device: torch.device) -> float:
    """Wall time of one synchronised call, for calibrating window lengths."""
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return (time.perf_counter() - start) * 1e3


def run_for(fn: Callable[[], object], device: torch.device, duration_ms: float, per_call_ms: float) -> int:
    """Call `fn` back to back for about `duration_ms`; returns the number of calls."""
    n = max(1, math.ceil(duration_ms / max(per_call_ms, 1e-3)))
    for _ in range(n):
        fn()
    _sync(device)
    return n


#: GPU clock cycles a CUDA-graph timing sleeps before its windows while the host queues them: about 0.25 ms,
#: plus about 100 us a call at full clock, so that a measuring thread descheduled for a moment by other work on
#: the host does not open gaps inside the windows (25 us a call left the fastest nb201 cells, 12 calls to a 5 ms
#: window, little slack). It did not explain why most survivors measured beside a population read 5-11% slow:
#: those readings persisted with the larger margin (BENCHMARKS.md, "Seed 85").
PREFILL_CYCLES = 500_000
PREFILL_CYCLES_PER_CALL = 200_000


def time_windows(fn: Callable[[], object], device: torch.device, *, warmup: int, repeats: int,
                 min_window_ms: float, max_iters: int, prefill: bool = False, lead_in_ms: float = 0.0) -> Timing:
    """Warm up (`warmup` calls, the last one timed), size windows to last >= min_window_ms, run untimed
    calls for `lead_in_ms`, then time `repeats` windows.

    prefill=True queues the windows behind a short GPU sleep: right for CUDA-graph replay, whose
    enqueue cost is tiny, wrong for eager mode, whose launch overhead is part of what is measured."""
    for _ in range(warmup - 1):
        fn()
    estimate = time_once_ms(fn, device)  # the last warm-up call, timed to size the windows
    iters = int(min(max_iters, max(1, math.ceil(min_window_ms / max(estimate, 1e-3)))))
    if lead_in_ms > 0:
        run_for(fn, device, lead_in_ms, estimate)
    windows: list[float] = []
    if device.type == "cuda":
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        if prefill and hasattr(torch.cuda, "_sleep"):
            # Keep the GPU busy while the CPU enqueues every window, so that a descheduled
            # CPU thread cannot open a gap inside a window (used where enqueueing is cheap).
            torch.cuda._sleep(int(PREFILL_CYCLES + PREFILL_CYCLES_PER_CALL * repeats * iters))
        for start, end in events:
            start.record()
            for _ in range(iters):
                fn()
            end.record()
        torch.cuda.synchronize(device)
        windows = [start.elapsed_time(end) / iters for start, end in events]
    else:
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            windows.append((time.perf_counter() - t0) * 1e3 / iters)
    return Timing(tuple(windows), iters)
