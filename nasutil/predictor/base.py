"""The predictor interface: what every predictor takes and returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

from nasutil.devices import datasheet_peak_tflops
from nasutil.evaluator.config import check_run_settings
from nasutil.operators import Op, network_flops


@dataclass(frozen=True)
class PredictTarget:
    """Where and how the candidate would run."""

    device_name: str
    dtype: str = "fp16"
    batch_size: int = 256
    mode: str = "cudagraph"

    def __post_init__(self) -> None:
        check_run_settings(self.dtype, self.mode, self.batch_size)

    @property
    def key(self) -> str:
        """`dtype/batch/mode`: how profiles file what they know per configuration."""
        return f"{self.dtype}/{self.batch_size}/{self.mode}"


@dataclass(frozen=True)
class Prediction:
    space: str
    arch: str
    predictor: str
    device_name: str
    dtype: str
    batch_size: int
    mode: str
    flops_per_image: int
    latency_ms: float
    throughput_per_s: float
    utilization: float | None

    def to_dict(self) -> dict:
        return asdict(self)


class Predictor(ABC):
    """Maps a network's ops (see `nasutil.operators`) to a latency on a target."""

    name: str

    @abstractmethod
    def predict_latency_ms(self, ops: list[Op], target: PredictTarget) -> float:
        """Predicted median latency of one batch."""

    def predict(self, ops: list[Op], target: PredictTarget, *, space: str = "", arch: str = "") -> Prediction:
        return prediction_from_latency(network_flops(ops), target, self.predict_latency_ms(ops, target), self.name,
                                       space, arch)


def prediction_from_latency(flops_per_image: int, target: PredictTarget, latency_ms: float, predictor: str,
                            space: str = "", arch: str = "") -> Prediction:
    """Throughput and utilization follow from a predicted latency exactly as the evaluator derives them."""
    peak = datasheet_peak_tflops(target.device_name, target.dtype)
    achieved = flops_per_image * target.batch_size / (latency_ms * 1e-3) / 1e12
    return Prediction(space=space, arch=arch, predictor=predictor, device_name=target.device_name,
                      dtype=target.dtype, batch_size=target.batch_size, mode=target.mode,
                      flops_per_image=flops_per_image, latency_ms=latency_ms,
                      throughput_per_s=target.batch_size / (latency_ms * 1e-3),
                      utilization=achieved / peak if peak else None)
