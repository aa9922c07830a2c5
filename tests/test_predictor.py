"""Predictors on CPU: the analytical model's behaviour, calibration, and the learned model's storage."""

import json

import numpy as np
import pytest

from nasutil import NasutilError, get_space
from nasutil.counting import count_model
from nasutil.predictor.analytical import AnalyticalPredictor, KernelModel, calibrate
from nasutil.predictor.base import PredictTarget
from nasutil.predictor.learned import LearnedLatencyModel

H200 = PredictTarget(device_name="NVIDIA H200", dtype="fp16", batch_size=256, mode="cudagraph")


@pytest.fixture(scope="module")
def nb201_counts():
    space = get_space("nb201")
    cells = {
        "conv": "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|",
        "skip": "|skip_connect~0|+|skip_connect~0|skip_connect~1|+|skip_connect~0|skip_connect~1|skip_connect~2|",
        "mixed": "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
    }
    return {k: count_model(space.build(space.parse(v)), 32) for k, v in cells.items()}


def test_analytical_orders_and_modes(nb201_counts):
    predictor = AnalyticalPredictor()
    conv = predictor.predict_latency_ms(nb201_counts["conv"], H200)
    skip = predictor.predict_latency_ms(nb201_counts["skip"], H200)
    assert conv > skip > 0
    eager = predictor.predict_latency_ms(nb201_counts["skip"], PredictTarget("NVIDIA H200", "fp16", 1, "eager"))
    graph = predictor.predict_latency_ms(nb201_counts["skip"], PredictTarget("NVIDIA H200", "fp16", 1, "cudagraph"))
    assert eager > graph
    bigger = predictor.predict_latency_ms(nb201_counts["conv"], PredictTarget("NVIDIA H200", "fp16", 1024, "cudagraph"))
    assert bigger > conv
    p = predictor.predict(nb201_counts["conv"], H200, space="nb201", arch="x")
    assert p.throughput_per_s == pytest.approx(256 / (p.latency_ms / 1e3)) and 0 < p.utilization < 1


def test_analytical_needs_a_known_device(nb201_counts):
    with pytest.raises(NasutilError, match="no datasheet entry"):
        AnalyticalPredictor().predict_latency_ms(nb201_counts["conv"], PredictTarget("Imaginary GPU 9000"))
    with pytest.raises(NasutilError, match="no bf16 peak"):
        AnalyticalPredictor().predict_latency_ms(nb201_counts["conv"], PredictTarget("Tesla T4", "bf16"))


def test_calibration_recovers_a_known_model(nb201_counts):
    truth = KernelModel(dense_efficiency=0.3, kernel_us=4.0)
    samples = [(c, PredictTarget("NVIDIA H200", "fp16", b, "cudagraph"),
                AnalyticalPredictor(truth).predict_latency_ms(c, PredictTarget("NVIDIA H200", "fp16", b, "cudagraph")))
               for c in nb201_counts.values() for b in (1, 64, 256, 1024)]
    fixed = ("pointwise_efficiency", "depthwise_efficiency", "memory_efficiency", "launch_us", "graph_gap_us")
    fitted = calibrate(samples, fixed=fixed)
    assert fitted.dense_efficiency == pytest.approx(0.3, rel=0.05)
    assert fitted.kernel_us == pytest.approx(4.0, rel=0.05)


def test_learned_model_round_trips_through_json():
    rng = np.random.default_rng(0)
    x = rng.random((200, 5))
    y = np.exp(1 + x @ np.array([1.0, -0.5, 0.3, 0.0, 0.2]))
    model = LearnedLatencyModel().fit(x, y)
    again = LearnedLatencyModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert np.allclose(model.predict_ms(x[:20]), again.predict_ms(x[:20]))
    assert np.median(np.abs(model.predict_ms(x) - y) / y) < 0.1
    with pytest.raises(NasutilError):
        LearnedLatencyModel().fit(x[:5], y[:5])
    with pytest.raises(NasutilError):
        LearnedLatencyModel.from_dict({"kind": "pickle"})
