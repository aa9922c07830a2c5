"""Analytical predictor: a per-kernel roofline with launch overhead and wave quantization.

Every leaf layer with work is one kernel. Its time is the larger of its compute time
(FLOPs / (peak x efficiency of its operator class), stretched by wave quantization
over the SMs) and its memory time (bytes / (bandwidth x efficiency)), plus a fixed
per-kernel cost. In eager mode the CPU must also launch each kernel, so a kernel
takes at least the launch cost; in CUDA-graph mode launches cost almost nothing;
`compile` fuses element-wise layers into their producers.

The efficiencies and fixed costs are the only free constants: `calibrate` fits them
to measurements (least squares on log latency), `AnalyticalPredictor()` uses defaults.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from nasutil.counting import LayerStats, ModelCounts
from nasutil.devices import lookup
from nasutil.errors import NasutilError
from nasutil.evaluator.dtypes import element_size
from nasutil.predictor.base import Predictor, PredictTarget

NO_KERNEL = {"identity", "flatten", "dropout", "sequential"}
ELEMENTWISE = {"norm", "act", "zero"}
TILE = 128  # output tile edge of a tensor-core GEMM/conv kernel


@dataclass(frozen=True)
class KernelModel:
    """The free constants of the analytical model (times in microseconds)."""

    dense_efficiency: float = 0.55
    pointwise_efficiency: float = 0.45
    depthwise_efficiency: float = 0.02
    memory_efficiency: float = 0.6
    kernel_us: float = 2.5
    launch_us: float = 9.0  # eager: CPU time to launch one layer's kernel
    graph_gap_us: float = 0.8  # cudagraph: gap between consecutive kernels

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> KernelModel:
        known = {f.name for f in fields(cls)}
        return cls(**{k: float(v) for k, v in data.items() if k in known})


def kind_class(kind: str) -> str:
    if kind.startswith("dwconv") or kind.startswith("gconv"):
        return "depthwise"
    if kind == "conv1x1" or kind == "linear":
        return "pointwise"
    if kind.startswith("conv"):
        return "dense"
    if kind in NO_KERNEL:
        return "none"
    return "memory"


def _waves_factor(layer: LayerStats, batch: int, sms: int) -> float:
    """Work is issued in whole waves of tiles over the SMs: the last, partial wave costs a full one."""
    if len(layer.output_shape) < 1:
        return 1.0
    channels = layer.output_shape[0]
    spatial = math.prod(layer.output_shape[1:]) if len(layer.output_shape) > 1 else 1
    tiles = math.ceil(batch * spatial / TILE) * math.ceil(channels / TILE)
    waves = math.ceil(tiles / sms)
    return waves * sms / tiles


def layer_time_us(layer: LayerStats, target: PredictTarget, model: KernelModel, peak_tflops: float,
                  bandwidth_gbs: float, sms: int, elem: int, fused: bool = False) -> float:
    cls = kind_class(layer.kind)
    if cls == "none" or (fused and layer.kind in ELEMENTWISE):
        return 0.0
    batch = target.batch_size
    moved = ((layer.input_elems + layer.output_elems) * batch + layer.params) * elem
    memory_us = moved / (bandwidth_gbs * 1e3 * model.memory_efficiency)
    compute_us = 0.0
    if layer.flops:
        efficiency = {"dense": model.dense_efficiency, "pointwise": model.pointwise_efficiency,
                      "depthwise": model.depthwise_efficiency}.get(cls, model.depthwise_efficiency)
        compute_us = layer.flops * batch / (peak_tflops * 1e6 * efficiency)
        if cls in ("dense", "pointwise"):
            compute_us *= _waves_factor(layer, batch, sms)
    kernel = max(compute_us, memory_us) + model.kernel_us
    if target.mode == "eager":
        return max(kernel, model.launch_us)
    return kernel + model.graph_gap_us


class AnalyticalPredictor(Predictor):
    name = "analytical"

    def __init__(self, model: KernelModel | None = None) -> None:
        self.model = model or KernelModel()

    def predict_latency_ms(self, counts: ModelCounts, target: PredictTarget) -> float:
        spec = lookup(target.device_name)
        if spec is None:
            raise NasutilError(f"no datasheet entry for device {target.device_name!r}")
        peak = spec.peak(target.dtype)
        if peak is None:
            raise NasutilError(f"{spec.name} has no {target.dtype} peak")
        elem = element_size(target.dtype)
        fused = target.mode == "compile"
        total = sum(layer_time_us(l, target, self.model, peak, spec.memory_bandwidth_gbs, spec.sm_count, elem, fused)
                    for l in counts.layers)
        return total / 1e3


def calibrate(samples: list[tuple[ModelCounts, PredictTarget, float]], start: KernelModel | None = None,
              fixed: tuple[str, ...] = ()) -> KernelModel:
    """Fit the model's constants to measured latencies (ms) by least squares on log latency."""
    from scipy.optimize import least_squares

    start = start or KernelModel()
    names = [f.name for f in fields(KernelModel) if f.name not in fixed]
    x0 = np.log([getattr(start, n) for n in names])
    measured = np.log([s[2] for s in samples])

    def residuals(x: np.ndarray) -> np.ndarray:
        model = replace(start, **dict(zip(names, np.exp(x))))
        predictor = AnalyticalPredictor(model)
        return np.log([predictor.predict_latency_ms(c, t) for c, t, _ in samples]) - measured

    fit = least_squares(residuals, x0, bounds=(np.log(1e-4), np.log(1e3)))
    return replace(start, **dict(zip(names, np.exp(fit.x))))
