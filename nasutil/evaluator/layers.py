"""Per-layer breakdown: kernel time per leaf module (torch.profiler) joined with its FLOPs.

Each leaf module's forward is wrapped in a profiler range; the device time of the
kernels launched inside that range is the layer's time (CPU time on CPU). A
layer's utilization is its FLOPs / its kernel time / the peak, and the GPU time
it wastes is its kernel time x (1 - utilization).
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn as nn
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

from nasutil.counting import LayerStats, ModelCounts, leaf_modules

_PREFIX = "nasutil.layer::"


def profile_layer_times_ms(model: nn.Module, x: torch.Tensor, iters: int = 3) -> tuple[dict[str, float], float]:
    """Mean time per forward of each leaf module (ms), and the total kernel time per forward."""
    stack: list[record_function] = []
    handles = []
    for name, module in leaf_modules(model):
        def pre(mod, args, _name=name):
            rf = record_function(_PREFIX + _name)
            rf.__enter__()
            stack.append(rf)

        def post(mod, args, out):
            stack.pop().__exit__(None, None, None)

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    on_gpu = x.device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    try:
        model(x)  # one un-profiled pass so that lazy initialisation is not counted
        with profile(activities=activities) as prof:
            for _ in range(iters):
                model(x)
            if on_gpu:
                torch.cuda.synchronize(x.device)
    finally:
        for h in handles:
            h.remove()
    times: dict[str, float] = {}
    for event in prof.events():
        if not event.name.startswith(_PREFIX) or getattr(event, "device_type", None) != torch.autograd.DeviceType.CPU:
            continue
        us = _kernel_us(event) if on_gpu else event.cpu_time_total
        key = event.name[len(_PREFIX):]
        times[key] = times.get(key, 0.0) + us / 1e3 / iters
    if on_gpu:  # every kernel once; the ranges' GPU-side annotations are not kernels
        total = sum(e.time_range.elapsed_us() for e in prof.events()
                    if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
                    and not getattr(e, "is_user_annotation", False) and not e.name.startswith(_PREFIX)) / 1e3 / iters
    else:
        total = sum(times.values())
    return times, total


def _kernel_us(event) -> float:
    """Device time of the kernels launched under a CPU event. The profiler also links the range's own
    GPU-side annotation to it as if it were a kernel (same name as the range): that span is skipped."""
    own = sum(k.duration for k in event.kernels if not k.name.startswith(_PREFIX))
    return own + sum(_kernel_us(child) for child in event.cpu_children)


def _merge_calls(layers: list[LayerStats]) -> list[LayerStats]:
    """One row per module: a module called several times per forward (a shared ReLU) sums its calls,
    as its profiled time does."""
    merged: dict[str, LayerStats] = {}
    for layer in layers:
        seen = merged.get(layer.name)
        merged[layer.name] = layer if seen is None else replace(
            seen, flops=seen.flops + layer.flops, input_elems=seen.input_elems + layer.input_elems,
            output_elems=seen.output_elems + layer.output_elems)
    return list(merged.values())


def layer_breakdown(counts: ModelCounts, times_ms: dict[str, float], batch_size: int,
                    peak_tflops: float | None) -> list[dict]:
    """One row per leaf layer: FLOPs per batch, time, achieved TFLOP/s, utilization, wasted time."""
    rows = []
    for layer in _merge_calls(counts.layers):
        t = times_ms.get(layer.name)
        flops = layer.flops * batch_size
        achieved = flops / (t * 1e-3) / 1e12 if t else None
        util = achieved / peak_tflops if achieved is not None and peak_tflops else None
        rows.append({
            "name": layer.name, "kind": layer.kind, "output_shape": list(layer.output_shape),
            "flops_per_batch": flops, "time_ms": t, "achieved_tflops": achieved, "utilization": util,
            "wasted_ms": t * (1 - min(util, 1.0)) if t is not None and util is not None else t,
        })
    return rows
