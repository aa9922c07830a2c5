"""Measure one module in this process: FLOPs, latency, throughput, utilization, counters, layers."""

from __future__ import annotations

import contextlib
import datetime as dt
import time

import torch
import torch.nn as nn

from nasutil.counting import ModelCounts, count_model
from nasutil.devices import cpu_name, datasheet_peak_tflops
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.counters import NvmlDevice, empty_counters, measure_counters
from nasutil.evaluator.dtypes import matmul_precision, torch_dtype
from nasutil.evaluator.layers import layer_breakdown, profile_layer_times_ms
from nasutil.evaluator.measurement import Measurement
from nasutil.evaluator.modes import prepare
from nasutil.evaluator.peak import measured_peak_tflops
from nasutil.evaluator.timing import time_windows
from nasutil.evaluator.weights import allocate, built_without_storage, materialize
from nasutil.errors import NasutilError


def resolve_device(name: str) -> torch.device:
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise NasutilError("no CUDA device is available here (use --device cpu)")
        device = torch.device(name)
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise NasutilError(f"{name} does not exist ({torch.cuda.device_count()} CUDA device(s))")
        return device
    return torch.device("cpu")


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()


_nvml_cache: dict[str, NvmlDevice] = {}


def _nvml(device: torch.device) -> NvmlDevice | None:
    if device.type != "cuda":
        return None
    key = str(device)
    if key not in _nvml_cache:
        _nvml_cache[key] = NvmlDevice.for_torch_device(device)
    return _nvml_cache[key]


_captured_before = False  # this process has captured a graph: library handles and workspaces exist


def _note_captured(mode: str) -> None:
    global _captured_before
    _captured_before = _captured_before or mode == "cudagraph"


def _lower(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def measure_model(model: nn.Module, config: MeasureConfig, *, space: str = "model", arch: str = "",
                  arch_hash: str | None = None, input_size: int = 224, in_channels: int = 3,
                  exclusive: contextlib.AbstractContextManager | None = None,
                  counts: ModelCounts | None = None) -> Measurement:
    """Time `model` as `config` says. Raises torch.cuda.OutOfMemoryError and friends to the caller.

    FLOPs are counted (unless `counts` brings them from the space's op listing) and the model is cast
    on the CPU before `exclusive` is entered; everything that touches the device (copies, capture,
    warm-up, timing, counters, profiling) runs inside it, so that several workers can prepare
    candidates while one of them has the device to itself. `exclusive` must be a context manager that
    may be entered again once left (`DeviceTurns.turn` gives one): the split turn enters it twice. (Other processes' copies and captures beside a
    timed window lengthen it: BENCHMARKS.md measured windows 1.5x too long with both left outside the
    turn.) With `config.device_turn="split"`, the
    copies take one turn and the timing another, and a capture without eager warm-up runs between them.
    With `config.device_turn="timing"`, for workers that share one context through CUDA MPS, the copies and
    a capture without eager warm-up run before the turn and the captured graph is let go after it. In both,
    `timing["turn_wait_s"]` is the wait for the (second) turn. `timing["turn_s"]` is how long the turns
    were held. A model built without storage (`nasutil.evaluator.weights`, `config.weights="device"`) is
    given its device memory before the turn and its values where the copies would run
    (`timing["allocate_s"]`, then `to_device_s`), unless its graph is captured after an eager warm-up: then it
    is given host memory and copied, as a network built with storage is.
    """
    device = resolve_device(config.device)
    phases: dict[str, float] = {}
    dtype = torch_dtype(config.dtype)
    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    model = model.eval()
    without_storage = built_without_storage(model)
    warm_up = config.eager_warm_up or not _captured_before
    # Counting runs the network on the host. And a network whose graph is captured after an eager warm-up (a
    # worker's first, or eager_warm_up=True) is copied: on an H100 each worker's first cell with weights made on
    # the device read up to 10% slow, on three seeds, where the copies and every later cell read as the default
    # settings (BENCHMARKS.md, "A worker's first network copied"); the cause is not established.
    captures_a_graph = device.type == "cuda" and config.mode == "cudagraph"
    if without_storage and (counts is None or config.per_layer or (captures_a_graph and warm_up)):
        model, without_storage = materialize(model, "cpu"), False
    t0 = time.perf_counter()
    if counts is None or config.per_layer:
        with torch.inference_mode():
            counts = count_model(model, input_size, in_channels, per_layer=config.per_layer)
    phases["count_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    model = model.to(dtype=dtype, memory_format=memory_format)
    phases["cast_s"] = time.perf_counter() - t0
    fill = None
    if without_storage:  # device memory now where the allocator holds it (outside the turn), values inside it
        t0 = time.perf_counter()
        fill = allocate(model, device)
        phases["allocate_s"] = time.perf_counter() - t0

    # a capture without eager warm-up only records (it launches nothing): "split" and "timing" take it out of
    # the turn ("timing" the copies too, which is right only where the workers share one context through MPS)
    graphed = captures_a_graph and not warm_up
    turn_kind = config.device_turn if graphed else "whole"
    with contextlib.ExitStack() as stack:
        stack.enter_context(matmul_precision(config.dtype))
        stack.enter_context(torch.inference_mode())
        turn = stack.enter_context(contextlib.ExitStack())  # closed once the device work is done

        def take_turn() -> float:
            turn.enter_context(exclusive or contextlib.nullcontext())
            return time.perf_counter()

        held = time.perf_counter() if turn_kind == "timing" else take_turn()
        t0 = time.perf_counter()
        if fill is None:
            model = model.to(device)
        else:
            fill()
        if turn_kind == "timing":
            x = torch.randn(config.batch_size, in_channels, input_size, input_size, dtype=dtype)
            x = x.contiguous(memory_format=memory_format).to(device)
        else:
            x = torch.randn(config.batch_size, in_channels, input_size, input_size, device=device, dtype=dtype)
            x = x.contiguous(memory_format=memory_format)
        if turn_kind == "split":  # the copies done before the turn is handed on
            torch.cuda.synchronize(device)
        phases["to_device_s"] = time.perf_counter() - t0
        held_before = 0.0
        if turn_kind == "split":
            held_before = time.perf_counter() - held
            turn.close()
        t0 = time.perf_counter()
        run = None
        if turn_kind != "whole":
            try:
                run = prepare(model, x, config.mode, warm_up=False, retry_with_warm_up=False)
            except RuntimeError:  # retried below with an eager warm-up, which runs on the device: inside the turn
                pass
            waited = time.perf_counter()
            held = take_turn()
            phases["turn_wait_s"] = held - waited
        if run is None:
            run = prepare(model, x, config.mode, warm_up=warm_up or turn_kind != "whole")
        phases["prepare_s"] = time.perf_counter() - t0 - phases.get("turn_wait_s", 0.0)

        t0 = time.perf_counter()
        prefill = config.mode == "cudagraph"
        nvml = _nvml(device)
        clock_before = nvml.sm_clock_mhz() if nvml else None
        timing = time_windows(run.fn, device, warmup=config.warmup, repeats=config.repeats,
                              min_window_ms=config.min_window_ms, max_iters=config.max_iters_per_window,
                              prefill=prefill, lead_in_ms=config.lead_in_ms)
        remeasured = False
        if timing.cv > config.cv_threshold:
            remeasured = True
            timing = time_windows(run.fn, device, warmup=1, repeats=2 * config.repeats,
                                  min_window_ms=2 * config.min_window_ms, max_iters=config.max_iters_per_window,
                                  prefill=prefill)
        phases["time_s"] = time.perf_counter() - t0
        _note_captured(config.mode)

        counters = empty_counters()
        reading = None
        # the lower of the clocks before and after the windows: a dip at either end shows
        sm_clock = _lower(clock_before, nvml.sm_clock_mhz() if nvml else None)
        if nvml is not None and config.counters:
            t0 = time.perf_counter()
            reading = measure_counters(run.fn, device, nvml, config.counter_window_ms, timing.median_ms,
                                       tolerance=config.counter_tolerance, max_ms=config.counter_max_ms)
            counters = reading.counters
            phases["counters_s"] = time.perf_counter() - t0
            phases["counter_windows"] = reading.windows

        name = device_name(device)
        measured_peak = measured_peak_tflops(str(device), config.dtype)
        datasheet = datasheet_peak_tflops(name, config.dtype) if device.type == "cuda" else None
        peak, source = (datasheet, "datasheet") if datasheet else (measured_peak, "measured_gemm")

        latency_s = timing.median_ms * 1e-3
        flops_per_batch = counts.flops_per_image * config.batch_size
        achieved = flops_per_batch / latency_s / 1e12

        layers = None
        if config.per_layer:
            t0 = time.perf_counter()
            times, kernel_total_ms = profile_layer_times_ms(model, x)
            layers = layer_breakdown(counts, times, config.batch_size, peak)
            phases["layers_s"] = time.perf_counter() - t0
            phases["kernel_time_ms"] = kernel_total_ms
        if turn_kind != "timing":  # letting a graph go may touch the device: inside the turn where contexts switch
            t0 = time.perf_counter()
            del run
            phases["release_s"] = time.perf_counter() - t0
        phases["turn_s"] = held_before + time.perf_counter() - held
        turn.close()

    return Measurement(
        space=space, arch=arch, arch_hash=arch_hash, device=device.type, device_name=name, dtype=config.dtype,
        batch_size=config.batch_size, mode=config.mode, channels_last=config.channels_last, input_size=input_size,
        num_classes=config.num_classes, params=counts.params, flops_per_image=counts.flops_per_image,
        latency_ms=timing.median_ms, latency_cv=timing.cv, latency_iqr_ms=timing.iqr_ms,
        throughput_per_s=config.batch_size / latency_s, achieved_tflops=achieved, peak_tflops=peak,
        peak_source=source, measured_peak_tflops=measured_peak, utilization=achieved / peak if peak else None,
        sm_clock_mhz=sm_clock, counters=counters, counter_window_ms=reading.window_ms if reading else None,
        counters_converged=reading.converged if reading else None, noisy=timing.cv > config.cv_threshold,
        timing={"windows_ms": list(timing.window_ms), "iters_per_window": timing.iters_per_window,
                "remeasured": remeasured, **phases},
        layers=layers, torch_version=torch.__version__,
        driver_version=nvml.driver_version if nvml else None,
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    )
