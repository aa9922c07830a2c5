"""NVML readings: GPM hardware counters over a window, plain utilization, SM clock.

GPM (GPU Performance Monitoring) exists on Hopper and newer. Every figure that a
device or driver cannot give is None, never 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

#: our name -> NVML GPM metric attribute
GPM_METRICS = {
    "sm_activity": "NVML_GPM_METRIC_SM_UTIL",
    "sm_occupancy": "NVML_GPM_METRIC_SM_OCCUPANCY",
    "tensor_activity": "NVML_GPM_METRIC_ANY_TENSOR_UTIL",
    "dram_bw_util": "NVML_GPM_METRIC_DRAM_BW_UTIL",
    "fp16_activity": "NVML_GPM_METRIC_FP16_UTIL",
    "fp32_activity": "NVML_GPM_METRIC_FP32_UTIL",
}
COUNTER_NAMES = (*GPM_METRICS, "nvml_gpu_util")


def empty_counters() -> dict[str, float | None]:
    return dict.fromkeys(COUNTER_NAMES)


@dataclass
class NvmlDevice:
    """An NVML handle for a torch CUDA device, or a stand-in that answers None."""

    handle: object | None
    gpm_supported: bool
    driver_version: str | None

    @classmethod
    def for_torch_device(cls, device: torch.device) -> NvmlDevice:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:
            return cls(None, False, None)
        try:
            handle = _handle(pynvml, device)
            driver = pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        except Exception:
            return cls(None, False, None)
        try:
            support = pynvml.nvmlGpmQueryDeviceSupport(handle)
            gpm = bool(support.isSupportedDevice)
        except Exception:
            gpm = False
        return cls(handle, gpm, driver)

    def _sm_clock(self, query: str) -> float | None:
        if self.handle is None:
            return None
        try:
            import pynvml

            return float(getattr(pynvml, query)(self.handle, pynvml.NVML_CLOCK_SM))
        except Exception:
            return None

    def sm_clock_mhz(self) -> float | None:
        return self._sm_clock("nvmlDeviceGetClockInfo")

    def max_sm_clock_mhz(self) -> float | None:
        """The highest SM clock the device runs at (its boost clock)."""
        return self._sm_clock("nvmlDeviceGetMaxClockInfo")

    def gpu_util_percent(self) -> float | None:
        if self.handle is None:
            return None
        try:
            import pynvml

            return float(pynvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except Exception:
            return None

    @contextlib.contextmanager
    def gpm_window(self) -> Iterator[dict[str, float | None]]:
        """Counters over the body of the `with`; the dict is filled on exit."""
        result = empty_counters()
        if not self.gpm_supported:
            yield result
            result["nvml_gpu_util"] = self.gpu_util_percent()
            return
        import pynvml

        first, second = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
        try:
            pynvml.nvmlGpmSampleGet(self.handle, first)
            yield result
            pynvml.nvmlGpmSampleGet(self.handle, second)
            result.update(_gpm_metrics(pynvml, first, second))
            result["nvml_gpu_util"] = self.gpu_util_percent()
        finally:
            pynvml.nvmlGpmSampleFree(first)
            pynvml.nvmlGpmSampleFree(second)


def _handle(pynvml, device: torch.device):
    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    if uuid is not None:
        with contextlib.suppress(Exception):
            text = str(uuid)
            return pynvml.nvmlDeviceGetHandleByUUID(text if text.startswith("GPU-") else f"GPU-{text}")
    return pynvml.nvmlDeviceGetHandleByIndex(index)


def _gpm_metrics(pynvml, first, second) -> dict[str, float | None]:
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.sample1 = first
    request.sample2 = second
    names = list(GPM_METRICS)
    request.numMetrics = len(names)
    for i, name in enumerate(names):
        request.metrics[i].metricId = getattr(pynvml, GPM_METRICS[name])
    out: dict[str, float | None] = dict.fromkeys(names)
    try:
        pynvml.nvmlGpmMetricsGet(request)
    except Exception:
        return out
    for i, name in enumerate(names):
        metric = request.metrics[i]
        if metric.nvmlReturn == 0:
            out[name] = float(metric.value)
    return out


#: the readings that must agree for a counter window to count as converged
CONVERGENCE_KEYS = ("sm_activity", "tensor_activity")
LEAD_IN_MS = 100.0


@dataclass
class CounterReading:
    """GPM counters over the last of back-to-back windows, and how they were read."""

    counters: dict[str, float | None]
    window_ms: float  # length of the window the counters cover
    windows: int  # windows read in all, the last included
    converged: bool | None  # None where there is nothing to converge (no GPM)


def measure_counters(fn: Callable[[], object], device: torch.device, nvml: NvmlDevice, window_ms: float,
                     per_call_ms: float, *, tolerance: float = 2.0, max_ms: float = 4000.0) -> CounterReading:
    """GPM counters once they have converged. GPM readings settle only over long windows (over 0.12 s an
    H200 read resnet18's SM activity at 50% where 0.4-1 s read 92%), so `fn` runs back to back, after a
    short lead-in, in windows of `window_ms` until two successive windows agree within `tolerance`
    points on SM and tensor activity, or `max_ms` of windows have run; the last window is reported."""
    from nasutil.evaluator.timing import run_for

    torch.cuda.synchronize(device)
    run_for(fn, device, LEAD_IN_MS, per_call_ms)
    readings: list[dict[str, float | None]] = []
    while True:
        with nvml.gpm_window() as counters:
            run_for(fn, device, window_ms, per_call_ms)
        readings.append(counters)
        if not nvml.gpm_supported:
            return CounterReading(counters, window_ms, len(readings), None)
        if len(readings) >= 2 and _agree(readings[-2], readings[-1], tolerance):
            return CounterReading(counters, window_ms, len(readings), True)
        if len(readings) * window_ms >= max_ms:
            return CounterReading(counters, window_ms, len(readings), False)


def _agree(a: dict[str, float | None], b: dict[str, float | None], tolerance: float) -> bool:
    pairs = [(a[k], b[k]) for k in CONVERGENCE_KEYS if a.get(k) is not None and b.get(k) is not None]
    return bool(pairs) and all(abs(x - y) <= tolerance for x, y in pairs)
