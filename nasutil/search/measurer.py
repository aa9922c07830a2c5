"""Measuring trained candidates on the hardware (the evaluator), where the config asks and a GPU exists."""

from __future__ import annotations

from typing import Any

import torch

from nasutil.errors import NasutilError


class Measurer:
    """Measures candidates through `nasutil.evaluator` (isolated worker, measurement cache)."""

    def __init__(self, device: str = "cuda", dtype: str = "fp16", batch_size: int = 256, mode: str = "cudagraph",
                 counters: bool = False, timeout_s: float = 300.0) -> None:
        from nasutil.evaluator import MeasureConfig

        self.config = MeasureConfig(device=device, dtype=dtype, batch_size=int(batch_size), mode=mode,
                                    counters=bool(counters))
        self.timeout_s = float(timeout_s)
        self._evaluator = None

    @property
    def description(self) -> str:
        c = self.config
        return f"evaluator on {c.device}, {c.dtype}, batch {c.batch_size}, {c.mode}"

    def measure(self, space_spec: str, arch_text: str) -> dict[str, Any]:
        """Measured figures (`measured_*` keys); a NasutilError naming the reason if it failed."""
        from nasutil.evaluator import Candidate

        if self._evaluator is None:
            from nasutil.evaluator import Evaluator
            from nasutil.evaluator.cache import MeasurementCache, default_cache_location

            try:
                cache = MeasurementCache(default_cache_location())  # shared where $NASUTIL_CACHE_URL says
            except NasutilError:
                cache = None  # a cache we cannot use is no reason not to measure
            self._evaluator = Evaluator(self.config, cache=cache, timeout_s=self.timeout_s)
        m = self._evaluator.measure(Candidate(space_spec, arch_text))
        if not m.ok:
            raise NasutilError(f"measurement failed: {m.error}")
        return {"measured_device": m.device_name, "measured_latency_ms": m.latency_ms,
                "measured_latency_cv": m.latency_cv, "measured_throughput_per_s": m.throughput_per_s,
                "measured_utilization": m.utilization, "measured_sm_clock_mhz": m.sm_clock_mhz}

    def close(self) -> None:
        if self._evaluator is not None:
            self._evaluator.close()
            self._evaluator = None


def optional_measurer(measure: bool | str = "auto", device: str = "cuda", dtype: str = "fp16", batch_size: int = 256,
                      mode: str = "cudagraph", counters: bool = False, timeout_s: float = 300.0) -> Measurer | None:
    """The `evaluator` config group's target: a Measurer, or None where measuring is off or `auto` finds
    no CUDA on this machine (the predictions then stand in)."""
    if measure not in ("auto", True, False):
        raise NasutilError(f"evaluator.measure must be auto, true or false, got {measure!r}")
    device = str(device)
    if measure is False or (measure == "auto" and device.startswith("cuda") and not torch.cuda.is_available()):
        return None
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise NasutilError("evaluator.measure=true with device cuda, but CUDA is not available "
                           "(use evaluator=auto, evaluator=none or evaluator=cpu)")
    return Measurer(device, str(dtype), int(batch_size), str(mode), bool(counters), float(timeout_s))
