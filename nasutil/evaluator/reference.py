"""Plain reference readings, independent of the evaluator's own procedure, for tests and benchmarks to
check it against: a model's CUDA graph replayed back to back, timed with CUDA events or read with GPM
counters over a long window."""

from __future__ import annotations

import statistics
import time

import torch

from nasutil.evaluator.counters import NvmlDevice


def capture_graph(model: torch.nn.Module, batch: torch.Tensor) -> torch.cuda.CUDAGraph:
    """`model(batch)` captured in one CUDA graph after three warm-up calls on a side stream (model and batch
    already on the GPU, in their dtype and layout)."""
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(batch)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            model(batch)
    return graph


def graph_replay_ms(model: torch.nn.Module, batch: torch.Tensor, replays: int = 50, windows: int = 7) -> float:
    """Median milliseconds per replay of the model's CUDA graph over `windows` windows of `replays` replays."""
    return replay_ms(capture_graph(model, batch), replays, windows)


def replay_ms(graph: torch.cuda.CUDAGraph, replays: int = 50, windows: int = 7, warm: int = 5) -> float:
    """Median milliseconds per replay of a captured graph over `windows` windows of `replays` replays, each
    window timed with CUDA events and waited for, after `warm` untimed replays."""
    for _ in range(warm):
        graph.replay()
    times = []
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / replays)
    return statistics.median(times)


def graph_replay_counters(model: torch.nn.Module, batch: torch.Tensor, seconds: float = 2.0,
                          lead_in_s: float = 0.5) -> dict[str, float | None]:
    """GPM counters over `seconds` of back-to-back replays of the model's CUDA graph, read after
    `lead_in_s` of replays."""
    graph = capture_graph(model, batch)
    nvml = NvmlDevice.for_torch_device(batch.device)

    def replay(duration: float) -> None:
        end = time.perf_counter() + duration
        while time.perf_counter() < end:
            for _ in range(10):
                graph.replay()
            torch.cuda.synchronize()

    replay(lead_in_s)
    with nvml.gpm_window() as counters:
        replay(seconds)
    return counters
