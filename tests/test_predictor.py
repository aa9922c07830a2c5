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


RESULTS = __import__("pathlib").Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200"
CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def test_shipped_h200_profile_predicts_measured_cells():
    import csv

    from nasutil.predictor.fit import predict
    from nasutil.predictor.profile import builtin_profiles, load_profile

    assert "h200" in builtin_profiles()
    profile = load_profile("h200")
    assert profile.device_name == "NVIDIA H200" and profile.driver_version and profile.torch_version
    entry = profile.learned_for("nb201", "fp16", 256, "cudagraph")
    assert entry is not None and entry.rows >= 1000
    with open(RESULTS / "repeatability_fast_w1.csv") as fh:
        rows = [r for r in csv.DictReader(fh)][:5]
    space = get_space("nb201")
    for row in rows:
        p = predict(space, "nb201", row["arch"], profile, PredictTarget("NVIDIA H200", "fp16", 256, "cudagraph"))
        assert p.predictor == "learned"
        assert p.latency_ms == pytest.approx(float(row["latency_ms"]), rel=0.15)


def test_profile_fit_and_predict_cli(cli, tmp_path):
    out = tmp_path / "p.json"
    r = cli("profile", "fit", str(RESULTS / "throughput_fast_w1.csv"), "--features", "encoding", "--out", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["format"] == "nasutil-device-profile" and data["learned"][0]["rows"] >= 500
    r = cli("predict", "nb201", CELL, "--profile", str(out), "--json")
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["predictor"] == "learned" and p["device_name"] == "NVIDIA H200" and 0.5 < p["latency_ms"] < 10
    r = cli("predict", "nb201", "--sample", "3", "--profile", str(out), "--predictor", "analytical", "--json")
    assert [json.loads(line)["predictor"] for line in r.stdout.splitlines()] == ["analytical"] * 3


def test_profile_build_on_cpu(cli, tmp_path):
    out = tmp_path / "cpu.json"
    r = cli("profile", "build", "--device", "cpu", "--spaces", "nb201", "--per-space", "12", "--batch-size", "1",
            "--out", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["learned"][0]["space"] == "nb201" and data["learned"][0]["rows"] >= 10


@pytest.mark.parametrize("args", [
    ("predict", "nb201", CELL, "--profile", "no_such_profile"),
    ("predict", "nb201", CELL, "--profile", "/no/such/profile.json"),
    ("predict", "nb201", CELL, "--batch-size", "3", "--predictor", "learned"),
    ("predict", "nb201", "|bad|"),
    ("predict", "nb201"),
    ("profile", "fit", "/no/such/folder", "--out", "/tmp/x.json"),
    ("profile", "show", "nope"),
])
def test_predict_bad_input(cli, args):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_malformed_profiles_are_rejected(tmp_path):
    from nasutil.predictor.profile import load_profile

    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"format": "other"}), json.dumps({"format": "nasutil-device-profile",
                                                                            "version": 99})):
        bad.write_text(text)
        with pytest.raises(NasutilError):
            load_profile(str(bad))
