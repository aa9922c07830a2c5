"""What every predictor takes (a target) and returns (a prediction)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from nasutil.devices import datasheet_peak_tflops
from nasutil.errors import NasutilError
from nasutil.evaluator.config import check_run_settings


@dataclass(frozen=True)
class PredictTarget:
    """Where and how the candidate would run."""

    device_name: str
    dtype: str = "fp16"
    batch_size: int = 256
    mode: str = "cudagraph"

    def __post_init__(self) -> None:
        if not isinstance(self.device_name, str):  # else a TypeError deep in the device lookup
            raise NasutilError(f"device_name must be text (a GPU's name, e.g. 'NVIDIA H200'), got "
                               f"{self.device_name!r}")
        check_run_settings(self.dtype, self.mode, self.batch_size)
        object.__setattr__(self, "batch_size", int(self.batch_size))  # numpy's int64 would not go to JSON

    @property
    def key(self) -> str:
        """`dtype/batch/mode`: how profiles file what they know per configuration."""
        return f"{self.dtype}/{self.batch_size}/{self.mode}"


@dataclass(frozen=True)
class Prediction:
    """Predicted figures of one candidate; latency and throughput are per batch of the target's size."""

    space: str
    arch: str
    predictor: str
    device_name: str
    dtype: str
    batch_size: int
    mode: str
    flops_per_image: int | None
    latency_ms: float
    throughput_per_s: float
    utilization: float | None
    params: int | None = None
    #: held-out mean relative latency error of the model that answered, where the profile measured it
    expected_error: float | None = None
    #: whether the profile was validated on this space at this configuration and timed every kind of op
    #: the candidate launches; where not, `unvalidated_reason` says what it never saw
    validated: bool = False
    unvalidated_reason: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def prediction_from_latency(flops_per_image: int | None, target: PredictTarget, latency_ms: float, predictor: str,
                            space: str = "", arch: str = "", params: int | None = None,
                            expected_error: float | None = None, unvalidated_reason: str | None = None) -> Prediction:
    """Throughput and utilization follow from a predicted latency exactly as the evaluator derives them."""
    peak = datasheet_peak_tflops(target.device_name, target.dtype)
    utilization = None
    if not (math.isfinite(latency_ms) and latency_ms > 0):
        raise NasutilError(f"{predictor} predicted a latency of {latency_ms} ms for {arch or 'a candidate'}: "
                           f"outside what its profile covers")
    if peak and flops_per_image is not None:
        utilization = flops_per_image * target.batch_size / (latency_ms * 1e-3) / 1e12 / peak
        if utilization > 1:  # faster than the device's peak: impossible, so the model is extrapolating
            raise NasutilError(f"{predictor} predicted {100 * utilization:.0f}% of {target.device_name}'s peak for "
                               f"{arch or 'a candidate'}: impossible, so this configuration is outside what its "
                               f"profile covers")
    return Prediction(space=space, arch=arch, predictor=predictor, device_name=target.device_name,
                      dtype=target.dtype, batch_size=target.batch_size, mode=target.mode,
                      flops_per_image=flops_per_image, latency_ms=latency_ms,
                      throughput_per_s=target.batch_size / (latency_ms * 1e-3), utilization=utilization,
                      params=params, expected_error=expected_error, validated=unvalidated_reason is None,
                      unvalidated_reason=unvalidated_reason)
