"""Operator features of a network at a target: what a learned predictor sees besides the encoding."""

from __future__ import annotations

import math

import numpy as np

from nasutil.errors import NasutilError
from nasutil.evaluator.dtypes import element_size
from nasutil.ops import Op
from nasutil.predictor.analytical import RooflineModel, op_class
from nasutil.predictor.op_tables import OpTableModel
from nasutil.predictor.prediction import PredictTarget

FEATURE_SETS = ("encoding", "encoding+operators")

FEATURE_NAMES = ("log_flops", "log_bytes", "kernels", "dense_kernels", "pointwise_kernels", "depthwise_kernels",
                 "memory_kernels", "log_dense_flops", "log_depthwise_flops", "log_analytical_ms",
                 "log_operators_ms")


def operator_features(ops: list[Op], target: PredictTarget, analytical: RooflineModel,
                      operators: OpTableModel | None = None, space: str = "") -> np.ndarray:
    """Counts and work per op class, plus the analytical and (where the profile has a table for
    the target) operator-level predictions, in logs: the trees learn their residuals."""
    batch, elem = target.batch_size, element_size(target.dtype)
    kernels = {"dense": 0, "pointwise": 0, "depthwise": 0, "memory": 0}
    flops = {"dense": 0, "depthwise": 0}
    total_flops = total_bytes = 0
    for op in ops:
        cls = op_class(op)
        kernels[cls] += 1
        work = op.flops
        total_flops += work
        total_bytes += op.bytes(1, elem)
        if cls in flops:
            flops[cls] += work * batch
    try:
        log_analytical = math.log(analytical.predict_latency_ms(ops, target))
    except NasutilError:  # no datasheet for this device (a CPU, say): a constant the trees ignore
        log_analytical = 0.0
    log_operators = 0.0
    if operators is not None and target.key in operators.tables:
        log_operators = math.log(operators.predict_latency_ms(ops, target, space))
    return np.array([
        math.log1p(total_flops * batch), math.log1p(total_bytes * batch),
        sum(kernels.values()), kernels["dense"], kernels["pointwise"], kernels["depthwise"], kernels["memory"],
        math.log1p(flops["dense"]), math.log1p(flops["depthwise"]),
        log_analytical, log_operators,
    ], dtype=np.float64)


def feature_vector(encoding: np.ndarray, ops: list[Op] | None, target: PredictTarget, features: str,
                   analytical: RooflineModel, operators: OpTableModel | None = None,
                   space: str = "") -> np.ndarray:
    if features == "encoding":
        return encoding.astype(np.float64)
    return np.concatenate([encoding, operator_features(ops, target, analytical, operators, space)])
