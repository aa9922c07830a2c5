"""Analytical predictor: a per-kernel roofline with launch overhead and wave quantization.

Every op (see `nasutil.ops`) is one kernel. Its time is the larger of its compute time
(FLOPs / (peak x efficiency of its operator class), stretched by wave quantization
over the SMs) and its memory time (bytes / (bandwidth x efficiency)), plus a fixed
per-kernel cost. In eager mode the CPU must also launch each kernel, so a kernel
takes at least the launch cost; in CUDA-graph mode launches cost almost nothing;
`compile` fuses element-wise ops into their producers.

The efficiencies and fixed costs are the only free constants: `calibrate` fits them
to measurements (least squares on log latency), `RooflineModel()` uses defaults.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from nasutil.devices import lookup
from nasutil.errors import NasutilError
from nasutil.evaluator.dtypes import element_size
from nasutil.ops import Op
from nasutil.predictor import profile_checks as check
from nasutil.predictor.prediction import PredictTarget

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
    def from_dict(cls, data: dict, where: str = "analytical") -> KernelModel:
        known = {f.name for f in fields(cls)}
        check.only_keys(data, known, where)
        # efficiencies are fractions of the peak; times are microseconds
        return cls(**{k: check.number(v, f"{where}.{k}", 1e-6, 1.0 if k.endswith("efficiency") else 1e6)
                      for k, v in data.items()})


FUSABLE = {"norm", "act", "scale", "add", "mul"}


def op_class(op: Op) -> str:
    """dense, pointwise or depthwise compute, or memory-bound."""
    if op.family in ("dwconv", "gconv"):
        return "depthwise"
    if op.family == "linear" or (op.family == "conv" and op.kernel == 1):
        return "pointwise"
    if op.family == "conv":
        return "dense"
    return "memory"


def _waves_factor(op: Op, batch: int, sms: int) -> float:
    """Work is issued in whole waves of tiles over the SMs: the last, partial wave costs a full one."""
    tiles = math.ceil(batch * op.h_out * op.w_out / TILE) * math.ceil(op.c_out / TILE)
    waves = math.ceil(tiles / sms)
    return waves * sms / tiles


def op_time_us(op: Op, target: PredictTarget, model: KernelModel) -> float:
    """One op's predicted time (microseconds)."""
    return _latency_ms(_op_arrays([op], target), model) * 1e3


class RooflineModel:
    """A network's latency as the sum of its ops' roofline times under one set of constants."""

    def __init__(self, model: KernelModel | None = None) -> None:
        self.model = model or KernelModel()

    def predict_latency_ms(self, ops: list[Op], target: PredictTarget) -> float:
        return _latency_ms(_op_arrays(ops, target), self.model)


def calibrate(samples: list[tuple[list[Op], PredictTarget, float]], start: KernelModel | None = None,
              fixed: tuple[str, ...] = ()) -> KernelModel:
    """Fit the model's constants to measured latencies (ms) by least squares on log latency."""
    from scipy.optimize import least_squares

    start = start or KernelModel()
    names = [f.name for f in fields(KernelModel) if f.name not in fixed]
    x0 = np.log([getattr(start, n) for n in names])
    measured = np.log([s[2] for s in samples])
    arrays = [_op_arrays(ops, target) for ops, target, _ in samples]

    def residuals(x: np.ndarray) -> np.ndarray:
        model = replace(start, **dict(zip(names, np.exp(x))))
        return np.log([_latency_ms(a, model) for a in arrays]) - measured

    fit = least_squares(residuals, x0, bounds=(np.log(1e-4), np.log(1e3)))
    return replace(start, **dict(zip(names, np.exp(fit.x))))


_CLASSES = ("dense", "pointwise", "depthwise", "memory")


def _op_arrays(ops: list[Op], target: PredictTarget) -> dict:
    """Per-op compute and memory time in microseconds at efficiency 1 (compute stretched by wave
    quantization), so that predicting, and calibration's inner loop, are array arithmetic."""
    spec = lookup(target.device_name)
    if spec is None:
        raise NasutilError(f"no datasheet entry for device {target.device_name!r}")
    peak = spec.peak(target.dtype)
    if peak is None:
        raise NasutilError(f"{spec.name} has no {target.dtype} peak")
    elem, batch = element_size(target.dtype), target.batch_size
    fused = target.mode == "compile"
    kept = [op for op in ops if not (fused and op.family in FUSABLE)]
    compute = np.array([op.flops * batch / (peak * 1e6) * (_waves_factor(op, batch, spec.sm_count)
                                                          if op_class(op) in ("dense", "pointwise") else 1.0)
                        for op in kept])
    memory = np.array([op.bytes(batch, elem) / (spec.memory_bandwidth_gbs * 1e3) for op in kept])
    classes = np.array([_CLASSES.index(op_class(op)) for op in kept])
    return {"compute": compute, "memory": memory, "classes": classes, "mode": target.mode}


def _latency_ms(arrays: dict, model: KernelModel) -> float:
    efficiency = np.array([model.dense_efficiency, model.pointwise_efficiency, model.depthwise_efficiency,
                           model.depthwise_efficiency])[arrays["classes"]]
    kernel = np.maximum(arrays["compute"] / efficiency, arrays["memory"] / model.memory_efficiency) + model.kernel_us
    if arrays["mode"] == "eager":
        kernel = np.maximum(kernel, model.launch_us)
    else:
        kernel = kernel + model.graph_gap_us
    return float(kernel.sum()) / 1e3
