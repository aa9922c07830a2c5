"""The predictor interface: what every predictor takes and returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

from nasutil.counting import ModelCounts
from nasutil.devices import datasheet_peak_tflops
from nasutil.evaluator.config import check_run_settings


@dataclass(frozen=True)
class PredictTarget:
    """Where and how the candidate would run."""

    device_name: str
    dtype: str = "fp16"
    batch_size: int = 256
    mode: str = "cudagraph"

    def __post_init__(self) -> None:
        check_run_settings(self.dtype, self.mode, self.batch_size)


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
    """Maps a network's operator counts (see `nasutil.counting`) to a latency on a target."""

    name: str

    @abstractmethod
    def predict_latency_ms(self, counts: ModelCounts, target: PredictTarget) -> float:
        """Predicted median latency of one batch."""

    def predict(self, counts: ModelCounts, target: PredictTarget, *, space: str = "", arch: str = "") -> Prediction:
        return prediction_from_latency(counts, target, self.predict_latency_ms(counts, target), self.name, space, arch)


def prediction_from_latency(counts: ModelCounts, target: PredictTarget, latency_ms: float, predictor: str,
                            space: str = "", arch: str = "") -> Prediction:
    """Throughput and utilization follow from a predicted latency exactly as the evaluator derives them."""
    peak = datasheet_peak_tflops(target.device_name, target.dtype)
    achieved = counts.flops_per_image * target.batch_size / (latency_ms * 1e-3) / 1e12
    return Prediction(space=space, arch=arch, predictor=predictor, device_name=target.device_name,
                      dtype=target.dtype, batch_size=target.batch_size, mode=target.mode,
                      flops_per_image=counts.flops_per_image, latency_ms=latency_ms,
                      throughput_per_s=target.batch_size / (latency_ms * 1e-3),
                      utilization=achieved / peak if peak else None)
