"""Plain reference readings, independent of the evaluator's own procedure, for tests and benchmarks to
check it against: a model's CUDA graph replayed back to back, with GPM counters over a long window."""

from __future__ import annotations

import time

import torch

from nasutil.evaluator.counters import NvmlDevice


def graph_replay_counters(model: torch.nn.Module, batch: torch.Tensor, seconds: float = 2.0,
                          lead_in_s: float = 0.5) -> dict[str, float | None]:
    """GPM counters over `seconds` of back-to-back replays of `model(batch)` captured in one CUDA graph,
    read after `lead_in_s` of replays (model and batch already on the GPU, in their dtype and layout)."""
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
