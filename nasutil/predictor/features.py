"""Operator features of a network at a target: what a learned predictor sees besides the encoding."""

from __future__ import annotations

import math

import numpy as np

from nasutil.counting import ModelCounts
from nasutil.evaluator.dtypes import element_size
from nasutil.errors import NasutilError
from nasutil.predictor.analytical import AnalyticalPredictor, kind_class
from nasutil.predictor.base import PredictTarget

FEATURE_NAMES = ("log_flops", "log_bytes", "kernels", "dense_kernels", "pointwise_kernels", "depthwise_kernels",
                 "memory_kernels", "log_dense_flops", "log_depthwise_flops", "log_analytical_ms")


def operator_features(counts: ModelCounts, target: PredictTarget, analytical: AnalyticalPredictor) -> np.ndarray:
    batch, elem = target.batch_size, element_size(target.dtype)
    kernels = {"dense": 0, "pointwise": 0, "depthwise": 0, "memory": 0}
    flops = {"dense": 0, "depthwise": 0}
    for layer in counts.layers:
        cls = kind_class(layer.kind)
        if cls == "none":
            continue
        kernels[cls] += 1
        if cls in flops:
            flops[cls] += layer.flops * batch
    try:
        log_analytical = math.log(analytical.predict_latency_ms(counts, target))
    except NasutilError:  # no datasheet for this device (a CPU, say): a constant the trees ignore
        log_analytical = 0.0
    return np.array([
        math.log1p(counts.flops_per_image * batch), math.log1p(counts.bytes_per_image(elem) * batch),
        sum(kernels.values()), kernels["dense"], kernels["pointwise"], kernels["depthwise"], kernels["memory"],
        math.log1p(flops["dense"]), math.log1p(flops["depthwise"]),
        log_analytical,
    ], dtype=np.float64)
