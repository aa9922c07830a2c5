"""The result of measuring one network: a plain, JSON-serialisable record."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class Measurement:
    """One network on one device at one configuration. Absent figures are None (null), never 0."""

    space: str
    arch: str
    device: str  # "cuda" or "cpu"
    device_name: str
    dtype: str
    batch_size: int
    mode: str
    status: str = "ok"  # "ok" or "failed"
    error: str | None = None
    arch_hash: str | None = None
    channels_last: bool = False
    input_size: int | None = None
    num_classes: int | None = None
    params: int | None = None
    flops_per_image: int | None = None
    latency_ms: float | None = None  # median over timed windows, one batch
    latency_cv: float | None = None
    latency_iqr_ms: float | None = None
    throughput_per_s: float | None = None  # images per second
    achieved_tflops: float | None = None
    peak_tflops: float | None = None  # datasheet (GPU) or measured GEMM (CPU)
    peak_source: str | None = None
    measured_peak_tflops: float | None = None
    utilization: float | None = None  # achieved / peak_tflops
    sm_clock_mhz: float | None = None
    counters: dict[str, float | None] = field(default_factory=dict)
    counter_window_ms: float | None = None  # the window the counters cover (the last of those read)
    counters_converged: bool | None = None  # whether the last two counter windows agreed
    noisy: bool = False
    timing: dict[str, Any] = field(default_factory=dict)  # windows, iterations, phases
    layers: list[dict[str, Any]] | None = None
    torch_version: str | None = None
    driver_version: str | None = None
    timestamp: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def fatal(self) -> bool:
        """The failure left the device unusable (a CUDA error other than out of memory): its worker must go."""
        return bool(self.timing.get("fatal"))

    def to_dict(self, with_layers: bool = True) -> dict[str, Any]:
        out = asdict(self)
        if not with_layers:
            out.pop("layers", None)
        return _finite(out)

    def to_row(self, columns: Sequence[str] | None = None) -> dict[str, Any]:
        """A flat row for a CSV table: `columns` of `to_dict` (all but layers and timing by default), then
        each hardware counter as `counter_<name>`."""
        data = self.to_dict(with_layers=False)
        counters = data.pop("counters") or {}
        data.pop("timing", None)
        row = data if columns is None else {k: data.get(k) for k in columns}
        row.update({f"counter_{k}": v for k, v in counters.items()})
        return row

    def to_json(self, with_layers: bool = True) -> str:
        return json.dumps(self.to_dict(with_layers), allow_nan=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def failed(cls, space: str, arch: str, config: Any, error: str, device_name: str = "") -> Measurement:
        return cls(space=space, arch=arch, device=config.device, device_name=device_name, dtype=config.dtype,
                   batch_size=config.batch_size, mode=config.mode, status="failed", error=error,
                   channels_last=config.channels_last)


def _finite(value: Any) -> Any:
    """NaN and infinities become None so that the JSON stays standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
