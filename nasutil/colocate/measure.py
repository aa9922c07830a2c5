"""Measure a co-located group: its strategy against `sequential`, timed in the same process and run, here
(`measure_group`; `measure_group_in_process` makes a broken group a failed row) or in a worker process of the
evaluator (`measure_group_isolated`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from nasutil.colocate.engine import check_strategy, colocate
from nasutil.colocate.strategies import strategy_named
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, MeasureConfig
from nasutil.evaluator.cache import MeasurementCache
from nasutil.evaluator.candidate import build
from nasutil.evaluator.counters import NvmlDevice, empty_counters, measure_counters
from nasutil.evaluator.dtypes import matmul_precision, torch_dtype
from nasutil.evaluator.run_model import device_name, resolve_device
from nasutil.evaluator.task import Task
from nasutil.evaluator.timing import time_windows
from nasutil.evaluator.worker import IsolatedWorker


@dataclass
class GroupMeasurement:
    """One group of networks run together, every network once per run, on one input batch each.
    Absent figures are None (a failed group has only its settings and the error)."""

    space: str
    archs: list[str]
    device: str
    device_name: str
    dtype: str
    batch_size: int
    requested: str
    status: str = "ok"
    error: str | None = None
    strategy: str | None = None  # the strategy that ran
    fallback_reason: str | None = None  # why `requested` did not, where it fell back
    latency_ms: float | None = None  # one run of the whole group: every network's outputs are ready after it
    latency_cv: float | None = None
    sequential_latency_ms: float | None = None  # the same networks one after another, same process and run
    speedup: float | None = None  # sequential_latency_ms / latency_ms; None where the group ran sequential
    compiled: bool = False  # every network compiled by Inductor (mode "compile"), sequential ones too
    compiled_frozen: bool | None = None  # compiled with frozen weights (BatchNorm folded), or with them as inputs
    compile_s: float | None = None  # seconds spent compiling the group
    plain_sequential_latency_ms: float | None = None  # compiled groups: the networks uncompiled, one after another
    speedup_over_plain: float | None = None  # plain_sequential_latency_ms / latency_ms
    throughput_per_s: float | None = None  # images per second over the group (networks x batch / latency)
    flops_per_image: list[int] = field(default_factory=list)  # each network's
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    utilization: float | None = None
    sm_clock_mhz: float | None = None
    counters: dict[str, float | None] = field(default_factory=dict)
    torch_version: str = torch.__version__
    timestamp: str = ""
    cached: bool = False  # read from the measurement cache, not measured in this run

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def failed(cls, candidates: list[Candidate], config: MeasureConfig, strategy: str, error: str) -> GroupMeasurement:
        return cls(space=candidates[0].space if candidates else "", archs=[c.arch for c in candidates],
                   device=config.device, device_name="", dtype=config.dtype, batch_size=config.batch_size,
                   requested=strategy, status="failed", error=error)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GroupMeasurement:
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)


#: a group's windows last at least this long, so that each holds many replays of a short group graph and
#: the first replay's launch latency weighs little
GROUP_WINDOW_MS = 20.0


def _timed(run, device: torch.device, config: MeasureConfig, graph: bool):
    return time_windows(run, device, warmup=config.warmup, repeats=config.repeats,
                        min_window_ms=max(config.min_window_ms, GROUP_WINDOW_MS),
                        max_iters=config.max_iters_per_window, prefill=graph)


def measure_group(candidates: list[Candidate], config: MeasureConfig, strategy: str = "streams", *,
                  fallback: bool = True, cache: MeasurementCache | None = None,
                  remeasure: bool = False, freezing: bool = False) -> GroupMeasurement:
    """Build the candidates, run them together by `strategy` and one after another by `sequential`,
    alternating the two timings twice so that a drift of the clock shows in both, and report the group.
    Every network gets its own input batch of `config.batch_size` (the group serves that many images per
    network per run). On a GPU every strategy runs from CUDA graphs, on a CPU eagerly. With `config.mode`
    "compile" each network is compiled by Inductor first, for the strategy and for `sequential`, and the
    group is timed against the uncompiled networks one after another as well (`speedup_over_plain`);
    freezing=True compiles them with their weights folded in (`compile_for_inference`).
    Raises NasutilError for a strategy that does not apply when fallback=False.

    With a `cache`, a group measured before (the same members in the same order, the same strategy and
    version of it, settings, device and torch) is read from it unless `remeasure`, and a new result is
    stored."""
    check_strategy(strategy)
    device = resolve_device(config.device)
    dtype = torch_dtype(config.dtype)
    memory_format = torch.channels_last if config.channels_last else torch.contiguous_format
    built = [build(c, config.input_size, config.num_classes) for c in candidates]
    key = None
    if cache is not None and all(b.arch_hash for b in built):
        compiled_as = "+compiled" if freezing else "+compiled-weights-as-inputs"
        cached_as = strategy_named(strategy).cache_name + (compiled_as if config.mode == "compile" else "")
        key = cache.group_key(candidates[0].space, [b.arch_hash for b in built], cached_as,
                              fallback, device_name(device), torch.__version__, config, built[0].input_size)
        stored = None if remeasure else cache.get_group(key)
        if stored is not None:
            try:
                hit = GroupMeasurement.from_dict({**stored, "cached": True})
            except TypeError:  # a row of another version: measured again and replaced
                hit = None
            if hit is not None and hit.ok:
                return hit
    result = _measure_built(candidates, built, config, strategy, fallback, device, dtype, memory_format, freezing)
    if key is not None and result.ok:
        cache.put_group(key, result.to_json())
    return result


def measure_group_in_process(candidates: list[Candidate], config: MeasureConfig, strategy: str = "streams", *,
                             fallback: bool = True, cache: MeasurementCache | None = None, remeasure: bool = False,
                             freezing: bool = False) -> GroupMeasurement:
    """`measure_group` here, where a group that breaks (out of memory, a network that cannot run at this input)
    is a failed row, as it is from a worker (`measure_group_isolated`), so that the other groups go on; a user
    error (NasutilError) is raised."""
    try:
        return measure_group(candidates, config, strategy, fallback=fallback, cache=cache, remeasure=remeasure,
                             freezing=freezing)
    except NasutilError:
        raise
    except torch.cuda.OutOfMemoryError as exc:
        return GroupMeasurement.failed(candidates, config, strategy, f"out of memory: {str(exc).splitlines()[0]}")
    except Exception as exc:  # noqa: BLE001 - one broken group must not end the run
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return GroupMeasurement.failed(candidates, config, strategy, f"{type(exc).__name__}: {message}")


def _measure_built(candidates, built, config: MeasureConfig, strategy: str, fallback: bool, device: torch.device,
                   dtype: torch.dtype, memory_format: torch.memory_format, freezing: bool = False) -> GroupMeasurement:
    flops = [b.counts.flops_per_image if b.counts else _counted(b) for b in built]  # on the CPU, before the move
    models = [b.model.eval().to(device, dtype, memory_format=memory_format) for b in built]
    inputs = [torch.randn(config.batch_size, b.in_channels, b.input_size, b.input_size, device=device, dtype=dtype)
              .contiguous(memory_format=memory_format) for b in built]
    compiled = config.mode == "compile"
    with matmul_precision(config.dtype), torch.inference_mode():
        start = time.perf_counter()
        together = colocate(models, inputs, strategy, fallback=fallback, compiled=compiled, freezing=freezing)
        # a group that runs one after another (asked for, or fallen back to) is its own sequential figure: a
        # second timing of the same code would report noise as a speedup
        apart = together.strategy != "sequential"
        alone = colocate(models, inputs, "sequential", compiled=compiled, freezing=freezing) if apart else None
        compile_s = time.perf_counter() - start if compiled else None
        prepared = {"together": together.run} | ({"alone": alone.run} if apart else {})
        if compiled:
            prepared["plain"] = colocate(models, inputs, "sequential").run
        graph = device.type == "cuda"
        runs: dict[str, list[float]] = {name: [] for name in prepared}
        for _ in range(2):
            for name, run in prepared.items():
                runs[name] += _timed(run, device, config, graph).window_ms
        nvml = NvmlDevice.for_torch_device(device) if device.type == "cuda" else None
        counters, clock = empty_counters(), None
        if nvml is not None:
            clock = nvml.sm_clock_mhz()
            if config.counters:
                latency = statistics.median(runs["together"])
                counters = measure_counters(together.run, device, nvml, config.counter_window_ms, latency,
                                            tolerance=config.counter_tolerance, max_ms=config.counter_max_ms).counters
    latency = statistics.median(runs["together"])
    sequential = statistics.median(runs["alone"]) if apart else latency
    plain = statistics.median(runs["plain"]) if compiled else None
    name = device_name(device)
    peak = _peak(device, name, config.dtype)
    achieved = sum(flops) * config.batch_size / (latency * 1e-3) / 1e12
    return GroupMeasurement(
        space=candidates[0].space, archs=[b.arch for b in built], device=device.type, device_name=name,
        dtype=config.dtype, batch_size=config.batch_size, strategy=together.strategy, requested=strategy,
        fallback_reason=together.fallback_reason, latency_ms=latency,
        latency_cv=statistics.pstdev(runs["together"]) / statistics.fmean(runs["together"]),
        sequential_latency_ms=sequential, speedup=sequential / latency if apart else None, compiled=compiled,
        compiled_frozen=freezing if compiled else None, compile_s=compile_s,
        plain_sequential_latency_ms=plain, speedup_over_plain=None if plain is None else plain / latency,
        throughput_per_s=len(models) * config.batch_size / (latency * 1e-3), flops_per_image=flops,
        achieved_tflops=achieved, peak_tflops=peak, utilization=achieved / peak if peak else None,
        sm_clock_mhz=clock, counters=counters,
        timestamp=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"))


def _counted(built) -> int:
    from nasutil.counting import count_model

    with torch.inference_mode():
        return count_model(built.model.eval(), built.input_size, built.in_channels, per_layer=False).flops_per_image


def _peak(device: torch.device, name: str, dtype: str) -> float | None:
    from nasutil.devices import datasheet_peak_tflops
    from nasutil.evaluator.peak import measured_peak_tflops

    if device.type == "cuda":
        return datasheet_peak_tflops(name, dtype) or measured_peak_tflops(str(device), dtype)
    return measured_peak_tflops(str(device), dtype)


def group_task(candidates: list[Candidate], config: MeasureConfig, strategy: str = "streams", *,
               fallback: bool = True, cache_location: str | None = None, remeasure: bool = False,
               freezing: bool = False) -> Task[GroupMeasurement]:
    """`measure_group` as a task for the evaluator's worker (`IsolatedWorker.run`): a user error is raised in
    the caller, any other failure is a failed group."""
    payload = {"candidates": [asdict(c) for c in candidates], "config": config.to_dict(), "strategy": strategy,
               "fallback": fallback, "cache_location": cache_location, "remeasure": remeasure, "freezing": freezing}
    return Task("nasutil.colocate.measure:run_group", payload, GroupMeasurement.from_dict,
                lambda why, _device_name: GroupMeasurement.failed(candidates, config, strategy, why),
                raise_user_errors=True)


def run_group(payload: dict[str, Any], exclusive=None) -> GroupMeasurement:
    """A group task's work in the worker, holding the device against sibling workers where there are any."""
    location = payload["cache_location"]
    cache = MeasurementCache(location) if location is not None else None
    try:
        with exclusive if exclusive is not None else contextlib.nullcontext():
            return measure_group([Candidate(**c) for c in payload["candidates"]], MeasureConfig(**payload["config"]),
                                 payload["strategy"], fallback=payload["fallback"], cache=cache,
                                 remeasure=payload["remeasure"], freezing=payload["freezing"])
    finally:
        if cache is not None:
            cache.close()


def measure_group_isolated(candidates: list[Candidate], config: MeasureConfig, strategy: str = "streams", *,
                           fallback: bool = True, timeout_s: float = 600.0, cache_location: str | None = None,
                           remeasure: bool = False, freezing: bool = False) -> GroupMeasurement:
    """`measure_group` in a fresh worker process of the evaluator with a time limit: an out-of-memory error, a
    crash or a hang fails that group, never the caller. A user error (unknown arch, a strategy that does not
    apply with fallback=False) is raised here as NasutilError."""
    resolve_device(config.device)  # a device this machine lacks is the user's error, before a worker starts
    worker = IsolatedWorker(config.device, timeout_s)
    try:
        return worker.run(group_task(candidates, config, strategy, fallback=fallback, cache_location=cache_location,
                                     remeasure=remeasure, freezing=freezing))
    finally:
        worker.stop()
