"""Predictors on CPU: analytical, operator-level and learned models, profiles, the CLI, measure-next."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from nasutil import NasutilError, get_space
from nasutil.predictor import PredictTarget
from nasutil.predictor.analytical import KernelModel, RooflineModel, calibrate
from nasutil.predictor.learned import LearnedLatencyModel

H200 = PredictTarget(device_name="NVIDIA H200", dtype="fp16", batch_size=256, mode="cudagraph")
CONV = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"


@pytest.fixture(scope="module")
def nb201_counts():
    space = get_space("nb201")
    cells = {
        "conv": CONV,
        "skip": "|skip_connect~0|+|skip_connect~0|skip_connect~1|+|skip_connect~0|skip_connect~1|skip_connect~2|",
        "mixed": "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
    }
    return {k: space.operators(space.parse(v)) for k, v in cells.items()}


def test_analytical_orders_and_modes(nb201_counts):
    predictor = RooflineModel()
    conv = predictor.predict_latency_ms(nb201_counts["conv"], H200)
    skip = predictor.predict_latency_ms(nb201_counts["skip"], H200)
    assert conv > skip > 0
    eager = predictor.predict_latency_ms(nb201_counts["skip"], PredictTarget("NVIDIA H200", "fp16", 1, "eager"))
    graph = predictor.predict_latency_ms(nb201_counts["skip"], PredictTarget("NVIDIA H200", "fp16", 1, "cudagraph"))
    assert eager > graph
    bigger = predictor.predict_latency_ms(nb201_counts["conv"], PredictTarget("NVIDIA H200", "fp16", 1024, "cudagraph"))
    assert bigger > conv
    from nasutil.predictor import load_profile, predict_many

    p, = predict_many("nb201", [CONV], H200, predictor="analytical")  # with the shipped profile's constants
    calibrated = RooflineModel(load_profile("h200").kernel_model("fp16", "cudagraph"))
    assert p.latency_ms == calibrated.predict_latency_ms(nb201_counts["conv"], H200)
    assert p.throughput_per_s == pytest.approx(256 / (p.latency_ms / 1e3)) and 0 < p.utilization < 1


def test_analytical_needs_a_known_device(nb201_counts):
    with pytest.raises(NasutilError, match="no datasheet entry"):
        RooflineModel().predict_latency_ms(nb201_counts["conv"], PredictTarget("Imaginary GPU 9000"))
    with pytest.raises(NasutilError, match="no bf16 peak"):
        RooflineModel().predict_latency_ms(nb201_counts["conv"], PredictTarget("Tesla T4", "bf16"))


def test_calibration_recovers_a_known_model(nb201_counts):
    truth = KernelModel(dense_efficiency=0.3, kernel_us=4.0)
    samples = [(c, PredictTarget("NVIDIA H200", "fp16", b, "cudagraph"),
                RooflineModel(truth).predict_latency_ms(c, PredictTarget("NVIDIA H200", "fp16", b, "cudagraph")))
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


def _measured(space: str, batch: int, mode: str, count: int) -> list[dict]:
    import csv

    with open(RESULTS / f"predictor_data_{space}.csv") as fh:
        rows = [r for r in csv.DictReader(fh) if r["status"] == "ok" and r["batch_size"] == str(batch)
                and r["mode"] == mode]
    return rows[-count:]


@pytest.mark.parametrize("space_name,batch,mode", [("nb201", 256, "cudagraph"), ("nb201", 1, "cudagraph"),
                                                    ("mbconv", 256, "cudagraph"), ("mbconv", 256, "eager")])
def test_shipped_h200_profile_predicts_measured_networks(space_name, batch, mode):
    from nasutil.predictor import make_predictor, predict_many
    from nasutil.predictor.profile import builtin_profiles, load_profile

    assert "h200" in builtin_profiles()
    profile = load_profile("h200")
    assert profile.device_name == "NVIDIA H200" and profile.driver_version and profile.torch_version
    assert {t.key for t in profile.operators} >= {"fp16/256/cudagraph", "fp16/256/eager", "fp16/1/cudagraph",
                                                  "fp16/1/eager"}
    target = PredictTarget("NVIDIA H200", "fp16", batch, mode)
    rows = _measured(space_name, batch, mode, 5)
    for which in ("operators", "auto"):
        predictor = make_predictor(which, profile=profile)
        for row, p in zip(rows, predict_many(space_name, [r["arch"] for r in rows], target, predictor=predictor)):
            assert p.latency_ms == pytest.approx(float(row["latency_ms"]), rel=0.1), (which, row["arch"])
            assert p.flops_per_image == int(row["flops_per_image"]) and p.params == int(row["params"])


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
    r = cli("predict", "nb201", CELL, "--profile", str(out), "--predictor", "operators")
    assert r.returncode == 2 and "no operator table" in r.stderr


def test_profile_fit_on_a_base_keeps_its_operator_tables(cli, tmp_path):
    out = tmp_path / "p.json"
    r = cli("profile", "fit", str(RESULTS / "predictor_data_nb201.csv"), "--base", "h200", "--min-rows", "2000",
            "--out", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["learned"] == [] and len(data["operators"]) == 4
    assert all(t["calibrated_on"] >= 800 for t in data["operators"])  # overlap refitted on the nb201 cells
    r = cli("predict", "mbconv", "--sample", "2", "--batch-size", "1", "--mode", "eager", "--profile", str(out),
            "--json")
    assert [json.loads(line)["predictor"] for line in r.stdout.splitlines()] == ["operators"] * 2


def test_a_fit_on_a_base_says_which_of_its_learned_models_it_does_not_carry_over(cli, tmp_path):
    """The shipped profile's learned models for spaces the new measurements do not cover were dropped without
    a word (`--base P --out P` is README's workflow): the fit names each one on stderr."""
    out = tmp_path / "p.json"
    r = cli("profile", "fit", str(RESULTS / "predictor_data_nb201.csv"), "--base", "h200", "--out", str(out))
    assert r.returncode == 0, r.stderr
    warning = [line for line in r.stderr.splitlines() if "learned models for" in line]
    assert len(warning) == 1 and "mbconv fp16 b256 cudagraph" in warning[0] and "nb201 fp16 b256 cudagraph" not in warning[0]
    kept = {(e["space"], e["batch_size"], e["mode"]) for e in json.loads(out.read_text())["learned"]}
    assert ("nb201", 256, "cudagraph") in kept


def test_profile_fit_pools_the_tables_of_several_bases(cli, tmp_path):
    """A new space's ops, timed by their own build, join the shipped tables: both bases' ops are kept, an op
    both timed keeps the first one's time (the shipped predictions do not move), and profiles of another
    device are refused."""
    from nasutil.ops import Op
    from nasutil.predictor import load_profile
    from nasutil.predictor.profile import merge_operator_tables

    shipped = load_profile("h200")
    extra = load_profile("h200")
    table = extra.operators[0]
    new_op = Op("dwconv", 24, 16, 16, 24, 16, 16, kernel=5, groups=24, dilation=2)
    old_op = next(iter(table.times_us))
    before = shipped.operators[0].times_us[old_op]
    table.times_us = {new_op: 123.0, old_op: 7.5}
    merged = merge_operator_tables([shipped, extra])
    first = next(t for t in merged.operators if t.key == table.key)
    assert first.times_us[new_op] == 123.0 and first.times_us[old_op] == before != 7.5
    assert len(first.times_us) == len(shipped.operators[0].times_us) + 1
    assert shipped.operators[0].times_us[old_op] == before and new_op not in shipped.operators[0].times_us
    extra.save(tmp_path / "extra.json")
    out = tmp_path / "p.json"
    r = cli("profile", "fit", str(RESULTS / "predictor_data_nb201.csv"), "--base", "h200", "--base",
            str(tmp_path / "extra.json"), "--min-rows", "2000", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert merge_operator_tables([load_profile(str(out))]).operators[0].times_us[new_op] == 123.0
    other = load_profile("h200")
    other.device_name = "NVIDIA A100"
    with pytest.raises(NasutilError, match="different devices"):
        merge_operator_tables([shipped, other])


def test_profile_build_needs_a_gpu(cli, tmp_path):
    r = cli("profile", "build", "--device", "cpu", "--out", str(tmp_path / "cpu.json"))
    assert r.returncode == 2 and "needs a CUDA device" in r.stderr


def test_operator_predictor_lookup_interpolation_and_overlap():
    from nasutil.ops import Op
    from nasutil.predictor.op_tables import OperatorTable, OpTableModel, fit_overlap

    target = PredictTarget("NVIDIA H200", "fp16", 64, "cudagraph")
    measured = {Op("conv", c, 16, 16, c, 16, 16, kernel=3): 2.0 + c / 8 for c in (16, 32, 64, 128)}
    measured[Op("add", 32, 16, 16, 32, 16, 16)] = 3.0
    table = OperatorTable("fp16", 64, "cudagraph", dict(measured))
    predictor = OpTableModel([table])
    conv32 = Op("conv", 32, 16, 16, 32, 16, 16, kernel=3)
    assert predictor.op_us(conv32, target) == 6.0  # measured: looked up
    unseen = [predictor.op_us(Op("conv", c, 16, 16, c, 16, 16, kernel=3), target) for c in (24, 48, 96, 256)]
    assert unseen == sorted(unseen) and 3.0 < unseen[0] < 10.0  # interpolated, growing with the work
    assert predictor.op_us(Op("mul", 32, 16, 16, 32, 16, 16), target) > 0  # no neighbour of its kind
    networks = []
    for n in range(2, 12):
        ops = [conv32] * n + [Op("add", 32, 16, 16, 32, 16, 16)] * (n % 3)
        networks.append((ops, (1.3 * predictor.sum_us(ops, target) + 0.7 * len(ops) + 4.0) / 1e3))
    fit_overlap(table, predictor, target, networks)
    assert (table.shared.scale, table.shared.per_op_us, table.shared.offset_us) == pytest.approx((1.3, 0.7, 4.0),
                                                                                              rel=1e-3)
    assert predictor.predict_latency_ms(networks[3][0], target) == pytest.approx(networks[3][1], rel=1e-6)
    with pytest.raises(NasutilError, match="no operator table"):
        predictor.predict_latency_ms([conv32], PredictTarget("NVIDIA H200", "fp16", 1, "eager"))


def test_version_1_profiles_still_load(tmp_path):
    from nasutil.predictor.profile import load_profile

    old = tmp_path / "v1.json"
    old.write_text(json.dumps({"format": "nasutil-device-profile", "version": 1, "device_name": "NVIDIA H200",
                               "analytical": {}, "learned": []}))
    profile = load_profile(str(old))
    assert profile.device_name == "NVIDIA H200" and profile.operators == []


def test_measure_next_picks_distinct_uncertain_candidates():
    from nasutil.predictor.active import choose_next, disagreement

    rng = np.random.default_rng(0)
    x = rng.random((60, 3))
    y = np.exp(x @ np.array([1.0, 2.0, 0.0]))
    pool = np.vstack([rng.random((30, 3)), np.tile([[0.5, 0.5, 0.5]], (5, 1))])
    picks = choose_next(x, y, pool, 8, seed=1)
    assert len(picks) == len(set(picks)) == 8 and all(0 <= i < len(pool) for i in picks)
    assert sum(i >= 30 for i in picks) <= 1  # identical rows are measured once
    assert picks == choose_next(x, y, pool, 8, seed=1)
    spread = disagreement(x, y, pool, seed=1)
    assert spread[picks].min() >= np.median(spread)


@pytest.mark.parametrize("args", [
    ("predict", "nb201", CELL, "--profile", "no_such_profile"),
    ("predict", "nb201", CELL, "--profile", "/no/such/profile.json"),
    ("predict", "nb201", CELL, "--batch-size", "3", "--predictor", "learned"),
    ("predict", "nb201", CELL, "--batch-size", "3", "--predictor", "operators"),
    ("predict", "nb201", "|bad|"),
    ("predict", "nb201"),
    ("profile", "fit", "/no/such/folder", "--out", "/tmp/x.json"),
    ("profile", "show", "nope"),
])
def test_predict_bad_input(cli, args):
    r = cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("settings, message", [
    ({"device_name": None}, r"device_name must be text \(a GPU's name, e\.g\. 'NVIDIA H200'\), got None"),
    ({"device_name": 3}, "device_name must be text .* got 3"),
    ({"dtype": None}, r"unknown dtype None \(choose from"), ({"mode": 3}, r"unknown mode 3 \(choose from"),
    ({"batch_size": None}, "batch size must be a whole number from 1 to 65536, got None"),
    ({"batch_size": "256"}, "batch size must be a whole number from 1 to 65536, got '256'"),
])
def test_a_target_of_the_wrong_kind_is_refused_naming_the_field(settings, message):
    """device_name=None was kept, and each prediction then failed with "TypeError: expected string or
    bytes-like object, got 'NoneType'"."""
    with pytest.raises(NasutilError, match=f"^{message}"):
        PredictTarget(**{"device_name": "NVIDIA H200", **settings})


def test_a_numpy_batch_size_predicts_what_json_can_hold():
    """A numpy batch size once went into each prediction as it was: its to_dict() could not be written as JSON."""
    from nasutil.predictor import predict_many

    target = PredictTarget("NVIDIA H200", batch_size=np.int64(256))
    assert type(target.batch_size) is int and target == H200
    json.dumps(predict_many("nb201", [CONV], target)[0].to_dict())


def test_malformed_profiles_are_rejected(tmp_path):
    from nasutil.predictor.profile import load_profile

    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"format": "other"}), json.dumps({"format": "nasutil-device-profile",
                                                                            "version": 99})):
        bad.write_text(text)
        with pytest.raises(NasutilError):
            load_profile(str(bad))
    table = {"dtype": "fp16", "batch_size": 1, "mode": "eager", "fields": ["family", "us"], "ops": [["conv", 1.0]]}
    bad.write_text(json.dumps({"format": "nasutil-device-profile", "version": 2, "device_name": "X",
                               "operators": [table]}))
    with pytest.raises(NasutilError, match="malformed"):
        load_profile(str(bad))


def test_profile_next_prints_unmeasured_archs_to_measure(cli, tmp_path):
    import csv

    with open(RESULTS / "predictor_data_nb201.csv") as fh:
        reader = csv.DictReader(fh)
        rows = [r for r in reader if r["batch_size"] == "256" and r["mode"] == "cudagraph"][:60]
    small = tmp_path / "m.csv"
    with small.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    r = cli("profile", "next", "nb201", str(small), "--count", "4", "--pool", "300")
    assert r.returncode == 0, r.stderr
    picked = r.stdout.split()
    space = get_space("nb201")
    assert len(set(picked)) == 4 and not set(picked) & {row["arch"] for row in rows}
    assert all(space.parse(a) for a in picked)
    r = cli("profile", "next", "nb201", str(small), "--batch-size", "8")
    assert r.returncode == 2 and "need at least 10 measured" in r.stderr


@pytest.mark.parametrize("size", [0, 1, 7, 1025, 100_000])
def test_input_sizes_a_space_does_not_take_are_usage_errors(cli, size):
    r = cli("predict", "nb201", "--sample", "1", "--input-size", str(size))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("predictor", ["analytical", "operators", "learned", "auto"])
@pytest.mark.parametrize("size", [8, 16, 64, 224, 1024])
def test_every_prediction_is_physically_possible(predictor, size):
    """Across the sizes a space takes, a prediction is either possible (0 < utilization <= 1) or refused."""
    from nasutil.errors import NasutilError
    from nasutil.predictor import predict_many

    archs = [a.to_string() for a in get_space("nb201").sample_many(5, seed=size)]
    try:
        predictions = predict_many("nb201", archs, predictor=predictor, input_size=size)
    except NasutilError as exc:
        assert "outside what its profile covers" in str(exc)
        return
    assert all(p.latency_ms > 0 and 0 < p.utilization <= 1 for p in predictions)


def test_a_prediction_faster_than_the_peak_is_refused():
    from nasutil.errors import NasutilError
    from nasutil.predictor.prediction import PredictTarget, prediction_from_latency

    target = PredictTarget("NVIDIA H200", "fp16", 256, "cudagraph")
    with pytest.raises(NasutilError, match="impossible"):
        prediction_from_latency(10**12, target, 1e-3, "learned", "nb201", "x")
    with pytest.raises(NasutilError, match="latency of"):
        prediction_from_latency(10**6, target, float("nan"), "learned", "nb201", "x")


def _fast_pass_rows(count: int) -> list[dict]:
    """The first `count` rows of a committed H200 measurements file, as `nasutil measure --out` writes them."""
    import csv

    with (RESULTS / "throughput_fast_w1.csv").open(newline="") as fh:
        return [dict(r) for r in csv.DictReader(fh)][:count]


#: rows of `_fast_pass_rows(300)` measured below 0.95 of their highest SM clock (the second, at 1455 of 1980
#: MHz): a fit leaves them out, and `profile fit` and `profile next` count them with the rows they skip
THROTTLED = 1
THROTTLED_REASON = "measured below 0.95 of its configuration's highest SM clock"


def _results_file(tmp_path, rows: list) -> Path:
    """`rows` as a JSON-lines measurements file for `profile fit`."""
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_profile_fit_skips_malformed_rows_with_a_count_and_reasons(cli, tmp_path):
    """Results files are untrusted: rows with a list for a device name, an object for a space, a NaN or
    negative latency, none at all under status ok, and a line that is not an object are left out, counted by
    reason, and the fit goes on with the rest."""
    good = _fast_pass_rows(300)
    bad = [{**good[0], "device_name": ["NVIDIA H200"]}, {**good[1], "space": {"name": "nb201"}},
           {**good[2], "latency_ms": "nan"}, {**good[3], "latency_ms": -1.0}, {**good[4], "batch_size": 2.5},
           {**good[5], "latency_ms": None, "status": "ok"}, "not an object"]
    path = _results_file(tmp_path, good + bad)
    out = tmp_path / "p.json"
    r = cli("profile", "fit", str(path), "--features", "encoding", "--out", str(out))
    assert r.returncode == 0, r.stderr
    warning = [line for line in r.stderr.splitlines() if "skipped" in line]
    assert warning and f"skipped {7 + THROTTLED} unusable measurement row(s)" in warning[0], r.stderr
    assert "device_name is not text" in warning[0] and "space is not text" in warning[0]
    assert "1 lacks latency_ms" in warning[0] and "1 is not a JSON object" in warning[0]
    assert "latency_ms out of range" in warning[0] and "latency_ms is not a finite number" in warning[0]
    assert "batch_size is not a whole number" in warning[0]
    assert json.loads(out.read_text())["learned"][0]["rows"] >= 250


def test_a_fit_onto_its_own_base_skips_latencies_and_clocks_a_profile_cannot_hold(cli, tmp_path):
    """`profile fit --base P --out P` with a row of latency 1e300 ms wrote a profile that nothing could load
    again, the user's own profile lost; and one clock of 1e300 MHz put every other row "below 0.95 of the
    highest clock", so nothing was fitted. Such rows are now skipped and counted, and P still loads."""
    good = _fast_pass_rows(300)
    bad = [{**good[0], "latency_ms": 1e300}, {**good[1], "latency_ms": 1e-300}, {**good[2], "sm_clock_mhz": 1e300},
           {**good[3], "sm_clock_mhz": -5}]
    path = _results_file(tmp_path, good + bad)
    mine = tmp_path / "mine.json"
    r = cli("profile", "fit", str(path), "--features", "encoding", "--out", str(mine))
    assert r.returncode == 0, r.stderr
    r = cli("profile", "fit", str(path), "--features", "encoding", "--base", str(mine), "--out", str(mine))
    assert r.returncode == 0 and f"skipped {4 + THROTTLED} unusable measurement row(s)" in r.stderr, r.stderr
    assert json.loads(mine.read_text())["learned"][0]["rows"] >= 250
    r = cli("predict", "nb201", CELL, "--profile", str(mine), "--json")
    assert r.returncode == 0, r.stderr


def _fit_and_next(cli, tmp_path: Path, path: Path) -> tuple[list, list[str]]:
    """`profile fit` and `profile next` on one measurements file: both runs (each must succeed), and the one
    line on which each says what it skipped."""
    runs = [cli("profile", "fit", str(path), "--features", "encoding", "--out", str(tmp_path / "p.json")),
            cli("profile", "next", "nb201", str(path), "--count", "2", "--pool", "100")]
    lines = []
    for r in runs:
        assert r.returncode == 0, r.stderr
        warning = [line for line in r.stderr.splitlines() if "skipped" in line]
        assert len(warning) == 1, r.stderr
        lines.append(warning[0])
    return runs, lines


def test_profile_fit_and_next_skip_and_count_every_number_they_cannot_use(cli, tmp_path):
    """An input size of -4, 0 or 1e300 was left out of a fit without a word (and mixed into `profile next`'s
    training rows), one of "abc" ended the fit with a traceback, 32.5 was read as 32, rows of another input
    size or number of classes than the networks the fit lists ops for were fitted by `profile next`, a batch
    size no profile can hold failed the write, and of a field given twice in a row the last counted. Each
    is now skipped and counted by its reason."""
    good = _fast_pass_rows(300)
    bad = [{**good[0], "input_size": -4}, {**good[1], "input_size": 0}, {**good[2], "input_size": 1e300},
           {**good[3], "input_size": 32.5}, {**good[4], "input_size": "abc"}, {**good[5], "input_size": 64},
           {**good[6], "num_classes": 1000}, {**good[7], "num_classes": -1}, {**good[8], "batch_size": 10**30},
           {**good[9], "batch_size": 2**21}, {**good[10], "sm_clock_mhz": "fast"}]
    path = _results_file(tmp_path, good + bad)
    with path.open("a") as fh:
        fh.write(json.dumps(good[11])[:-1] + ', "latency_ms": 1e-3}\n')  # the same key twice in one row
    expected = [f"skipped {12 + THROTTLED} unusable measurement row(s)", "3 input_size out of range (1 to 65,536)",
                "2 batch_size out of range (1 to 1,048,576)", "1 input_size is not a whole number",
                "1 input_size is not a number", "1 measured at another input size than its space's default",
                "1 measured with another number of classes than 10", "1 num_classes out of range (1 to 1,000,000)",
                "1 sm_clock_mhz is not a number", "1 gives 'latency_ms' twice"]
    (_, picked), lines = _fit_and_next(cli, tmp_path, path)
    assert all(part in line for line in lines for part in expected), lines
    assert json.loads((tmp_path / "p.json").read_text())["learned"][0]["rows"] >= 250
    assert len(picked.stdout.split()) == 2


def test_profile_fit_and_next_count_the_rows_of_model_zoos(cli, tmp_path):
    """Rows of torchvision and timm models passed every check and were then left out of the fit without a
    word: its learned models are per cell space. They are skipped and counted with that reason."""
    good = _fast_pass_rows(300)
    zoo = [{**good[0], "space": "torchvision", "arch": "resnet50", "input_size": 224, "num_classes": 1000},
           {**good[1], "space": "timm", "arch": "efficientnet_b0", "input_size": 224, "num_classes": 1000}]
    path = _results_file(tmp_path, zoo + good)
    for line in _fit_and_next(cli, tmp_path, path)[1]:
        assert f"skipped {2 + THROTTLED} unusable measurement row(s)" in line, line
        assert "2 of a model zoo (torchvision, timm): a fit learns cell spaces only" in line, line


def test_profile_fit_and_next_count_rows_measured_without_channels_last(cli, tmp_path):
    """Operator tables are timed in channels_last, the evaluator's default, but rows measured in NCHW
    (`nasutil measure --no-channels-last`) were fitted with the rest. They are skipped and counted, as is a
    channels_last that is neither true nor false; a row that leaves the field out was measured at the default
    (benchmarks/predictor_data.py writes no such column) and is kept."""
    from nasutil.predictor.training_data import read_measurements

    good = _fast_pass_rows(300)
    assert {r["channels_last"] for r in good} == {"True"}
    bad = [{**good[0], "channels_last": False}, {**good[1], "channels_last": "False"},
           {**good[2], "channels_last": "maybe"}, {**good[3], "channels_last": 1}]
    unsaid = {k: v for k, v in good[4].items() if k != "channels_last"}
    path = _results_file(tmp_path, good + bad + [unsaid])
    assert [r["channels_last"] for r in read_measurements([path])][-1] is True
    for line in _fit_and_next(cli, tmp_path, path)[1]:
        assert f"skipped {4 + THROTTLED} unusable measurement row(s)" in line, line
        assert "2 measured without channels_last, the memory format the operator tables are timed in" in line, line
        assert "2 channels_last is not true or false" in line, line


def test_a_measurements_file_naming_a_column_twice_is_refused(cli, tmp_path):
    """csv keeps the last of two columns of one name without a word: which latency was fitted was a guess."""
    path = tmp_path / "twice.csv"
    path.write_text("space,arch,device_name,dtype,batch_size,mode,status,latency_ms,latency_ms\n"
                    f"nb201,{CELL},NVIDIA H200,fp16,256,cudagraph,ok,1.0,2.0\n")
    r = cli("profile", "fit", str(path), "--out", str(tmp_path / "p.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "twice.csv: the header names column 'latency_ms' twice" in r.stderr, r.stderr


def test_a_profile_that_would_not_load_again_is_not_written(tmp_path):
    """Saving checks the profile as loading would, and writes in one step: what was at the path stays."""
    from nasutil.predictor.profile import load_profile

    profile = load_profile("h200")
    path = tmp_path / "mine.json"
    profile.save(path)
    before = path.read_bytes()
    profile.analytical["fp16/cudagraph"] = KernelModel(launch_us=float("inf"))
    with pytest.raises(NasutilError, match="would not load again"):
        profile.save(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["mine.json"]


def test_profile_fit_skips_rows_of_unknown_spaces_archs_dtypes_and_modes(cli, tmp_path):
    """One row with an arch its space does not parse, a space nasutil does not know, or an unknown dtype or
    mode stopped the whole fit in one line; README says unusable rows are skipped and counted."""
    good = _fast_pass_rows(300)
    bad = [{**good[0], "arch": "|not_an_op~0|"}, {**good[1], "space": "no_such_space"}, {**good[2], "dtype": "fp8"},
           {**good[3], "mode": "turbo"}]
    path = _results_file(tmp_path, good + bad)
    out = tmp_path / "p.json"
    r = cli("profile", "fit", str(path), "--features", "encoding", "--out", str(out))
    assert r.returncode == 0, r.stderr
    warning = [line for line in r.stderr.splitlines() if "skipped" in line]
    assert warning and f"skipped {4 + THROTTLED} unusable measurement row(s)" in warning[0], r.stderr
    assert "an unknown space" in warning[0] and "does not parse" in warning[0] and "dtype or mode" in warning[0]


def test_measurements_with_a_byte_order_mark_are_read(tmp_path):
    """A file saved by an editor that writes a BOM was refused as "not a JSON object"."""
    from nasutil.predictor.training_data import read_measurements

    row = {"status": "ok", "space": "nb201", "arch": "a", "device_name": "d", "dtype": "fp16", "batch_size": 1,
           "mode": "eager", "latency_ms": 1.0}
    path = tmp_path / "bom.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8-sig")
    assert [r["arch"] for r in read_measurements([path])] == ["a"]


def test_rows_marked_ok_without_a_latency_and_lines_that_are_not_objects_are_counted(tmp_path):
    """A row marked ok with no latency, and a JSON line holding a number, a list, text or null, were left out
    without a word; a failed measurement, which has no latency by design, is still no unusable row."""
    from nasutil.predictor.training_data import read_measurements

    row = {"status": "ok", "space": "nb201", "arch": "a", "device_name": "d", "dtype": "fp16", "batch_size": 1,
           "mode": "eager", "latency_ms": 1.0}
    lines = [row, {**row, "latency_ms": None}, {**row, "latency_ms": ""}, {k: v for k, v in row.items()
             if k != "latency_ms"}, {**row, "status": "failed", "latency_ms": None}, 3, [row], "row", None]
    path = tmp_path / "results.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    skipped: dict[str, int] = {}
    assert [r["arch"] for r in read_measurements([path], skipped)] == ["a"]
    assert skipped == {"lacks latency_ms": 3, "is not a JSON object": 4}


def test_profile_fit_on_nothing_usable_is_a_one_line_error(cli, tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"status": "ok", "space": ["x"], "arch": "a", "device_name": "d", "dtype": "fp16",
                                "batch_size": 1, "mode": "eager", "latency_ms": 1.0}) + "\n")
    r = cli("profile", "fit", str(path), "--out", str(tmp_path / "p.json"))
    assert r.returncode == 2 and "no successful measurements" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "space is not text" in r.stderr, r.stderr


def test_rows_without_a_status_or_with_one_the_evaluator_does_not_write_are_counted(cli, tmp_path):
    """A row with no status (a table put together by hand, a blank status column) was left out without a word,
    as a failed measurement is by design, and so was one with a status the evaluator does not write. Both are
    counted, by `profile fit` and `profile next` alike, with the rows their fit leaves out (a throttled GPU's)."""
    from nasutil.predictor.training_data import read_measurements

    good = _fast_pass_rows(300)
    bad = [{k: v for k, v in good[0].items() if k != "status"}, {**good[2], "status": ""},
           {**good[3], "status": None}, {**good[4], "status": "OK"}, {**good[5], "status": ["ok"]},
           {**good[6], "status": 1}, {**good[7], "status": "failed"}]
    path = _results_file(tmp_path, good + bad)
    skipped: dict[str, int] = {}
    assert len(read_measurements([path], skipped)) == len(good)
    assert skipped == {"has no status (ok or failed)": 3, "has a status other than ok or failed": 3}
    for line in _fit_and_next(cli, tmp_path, path)[1]:
        assert f"skipped {6 + THROTTLED} unusable measurement row(s)" in line, line
        assert "3 has no status (ok or failed)" in line and "3 has a status other than ok or failed" in line, line
        assert f"{THROTTLED} {THROTTLED_REASON}" in line, line


def test_rows_with_a_blank_or_overlong_device_name_are_counted(cli, tmp_path):
    """A blank device name, or one longer than a profile holds, counted as another device and ended the whole
    fit ("measurements must come from one device"); where it was the only one, the profile would not load."""
    good = _fast_pass_rows(300)
    bad = [{**good[0], "device_name": "  "}, {**good[2], "device_name": "N" * 1001}]
    path = _results_file(tmp_path, good + bad)
    for line in _fit_and_next(cli, tmp_path, path)[1]:
        assert f"skipped {2 + THROTTLED} unusable measurement row(s)" in line, line
        assert "1 lacks device_name" in line and "1 device_name is longer than 1,000 characters" in line, line


def test_a_fit_from_python_counts_the_rows_it_leaves_out(tmp_path):
    """fit_profile left out the rows of a model zoo, of another input size and of a throttled GPU without a
    word, and a row without a latency ended it with a KeyError: each is counted in `skipped` by reason, and
    without it a NasutilNotice says what was left out; median_latencies counts what it leaves out too."""
    from nasutil.errors import NasutilNotice
    from nasutil.predictor import training_data
    from nasutil.predictor.fit import fit_profile

    read_measurements, median_latencies = training_data.read_measurements, training_data.median_latencies
    good = read_measurements([_results_file(tmp_path, _fast_pass_rows(300))])
    bad = [{**good[0], "space": "torchvision", "arch": "resnet50"}, {**good[2], "input_size": 64},
           {k: v for k, v in good[3].items() if k != "latency_ms"}, "not a row"]
    expected = {training_data.ZOO_REASON: 1, "measured at another input size than its space's default": 1,
                "lacks latency_ms": 1, "is not a JSON object": 1, THROTTLED_REASON: THROTTLED}
    skipped: dict[str, int] = {}
    profile = fit_profile(good + bad, features="encoding", skipped=skipped)
    assert skipped == expected and profile.learned[0].rows == len(good) - THROTTLED
    with pytest.warns(NasutilNotice, match=re.escape(f"skipped {4 + THROTTLED} unusable measurement row(s)")):
        fit_profile(good + bad, features="encoding")
    counted: dict[str, int] = {}
    assert len(median_latencies(good + bad[:1], skipped=counted)) == 1
    assert counted == {training_data.ZOO_REASON: 1, THROTTLED_REASON: THROTTLED}


def test_a_source_longer_than_a_profile_holds_is_cut_where_it_is_written(tmp_path):
    """Each `profile fit --base P --out P` adds to P's source, and a merge joins the sources of its profiles:
    past the bound a profile holds, the fit would not be written. The middle of the note is cut instead."""
    from nasutil.predictor.fit import fit_profile
    from nasutil.predictor.profile import load_profile, merge_operator_tables
    from nasutil.predictor.profile_checks import MAX_SOURCE_CHARS
    from nasutil.predictor.training_data import read_measurements

    rows = read_measurements([_results_file(tmp_path, _fast_pass_rows(300))])
    long = "built from " + "x" * MAX_SOURCE_CHARS + " and fitted"
    path = tmp_path / "p.json"
    fit_profile(rows, features="encoding", source=long, skipped={}).save(path)
    source = load_profile(str(path)).source
    assert len(source) <= MAX_SOURCE_CHARS and source.startswith("built from x") and source.endswith("x and fitted")
    base = load_profile("h200")
    base.source = long
    assert len(merge_operator_tables([base, base]).source) <= MAX_SOURCE_CHARS


def _damaged_profile(tmp_path, change) -> str:
    import importlib.resources

    text = importlib.resources.files("nasutil.data").joinpath("profiles", "h200.json").read_text()
    data = json.loads(text)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    return str(path)


def _set_learned_param(key, value):
    def change(data):
        data["learned"][0]["model"]["params"][key] = value
    return change


def _set_op_field(name, value):
    def change(data):
        table = data["operators"][0]
        table["ops"][3][table["fields"].index(name)] = value
    return change


@pytest.mark.parametrize("change, field", [
    (_set_learned_param("max_iter", 1e8), "learned[0].model.params.max_iter"),
    (_set_learned_param("max_iter", 2.5), "learned[0].model.params.max_iter"),
    (_set_learned_param("loss", "poisson"), "unknown key 'loss'"),
    (_set_learned_param("learning_rate", float("nan")), "learned[0].model.params.learning_rate"),
    (lambda d: d["learned"][0]["model"]["latency_ms"].__setitem__(0, -1.0), "learned[0].model.latency_ms[0]"),
    (lambda d: d["learned"][0]["model"]["features"][3].__setitem__(0, float("inf")), "learned[0].model.features[3]"),
    (lambda d: d["learned"][0].__setitem__("batch_size", "256"), "learned[0].batch_size"),
    (lambda d: d["operators"][0].__setitem__("scale", float("nan")), "operators[0].scale"),
    (lambda d: d["operators"][0]["ops"][0].__setitem__(-1, 0), "operators[0].ops[0] time"),
    (lambda d: d["operators"][0].__setitem__("mode", "turbo"), "operators[0].mode"),
    (lambda d: d.__setitem__("plugins", ["x"]), "unknown key 'plugins'"),
    (lambda d: d["analytical"].__setitem__("fp16/cudagraph", {"dense_efficiency": 5.0}),
     "analytical.fp16/cudagraph.dense_efficiency"),
    (lambda d: d.__setitem__("learned", {"a": 1}), "learned must be a list"),
    (_set_op_field("dilation", float("inf")), "operators[0].ops[3].dilation"),
    (_set_op_field("dilation", 0), "operators[0].ops[3].dilation"),
    (_set_op_field("dilation", -3), "operators[0].ops[3].dilation"),
    (_set_op_field("dilation", 1e300), "operators[0].ops[3].dilation"),
    (_set_op_field("kernel", -5), "operators[0].ops[3].kernel"),
    (_set_op_field("groups", 0), "operators[0].ops[3].groups"),
    (_set_op_field("c_in", 1e300), "operators[0].ops[3].c_in"),
    (_set_op_field("stride", 1.5), "operators[0].ops[3].stride"),
    (_set_op_field("bias", "yes"), "operators[0].ops[3].bias"),
    (lambda d: d.__setitem__("device_name", 5), "device_name must be text, got 5"),
    (lambda d: d.__setitem__("device_name", " "), "device_name must name the device"),
    (lambda d: d.pop("device_name"), "device_name must be text, got None"),
    (lambda d: d.__setitem__("driver_version", ["580"]), "driver_version must be null or text of at most 100"),
    (lambda d: d.__setitem__("torch_version", 2.11), "torch_version must be null or text of at most 100"),
    (lambda d: d.__setitem__("torch_version", "2" * 101), "torch_version must be null or text of at most 100"),
    (lambda d: d.__setitem__("created", 20261130), "created must be text, got 20261130"),
    (lambda d: d.__setitem__("created", ["2026-11-30"]), "created must be text, got ['2026-11-30']"),
    (lambda d: d.__setitem__("created", None), "created must be text, got None"),
    (lambda d: d.__setitem__("created", "2" * 101), "created must be text of at most 100 characters, got 101 of them"),
    (lambda d: d.__setitem__("source", {"fitted": "r"}), "source must be text, got {'fitted': 'r'}"),
    (lambda d: d.__setitem__("source", 3.5), "source must be text, got 3.5"),
    (lambda d: d.__setitem__("source", "s" * 10_001), "source must be text of at most 10,000 characters, got 10,001"),
    (lambda d: d.__setitem__("device_name", "N" * 1001), "device_name must be text of at most 1,000 characters"),
    (lambda d: d["learned"][0].__setitem__("space", "s" * 1001), "learned[0].space must be text of at most 1,000"),
    (lambda d: d["learned"][0].__setitem__("features", "all"),
     "learned[0].features must be one of encoding, encoding+operators, got 'all'"),
])
def test_a_damaged_profile_is_refused_naming_the_field(cli, tmp_path, change, field):
    r = cli("predict", "nb201", "--sample", "1", "--profile", _damaged_profile(tmp_path, change))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-800:]
    assert "malformed device profile" in r.stderr and field in r.stderr, r.stderr


def test_a_profile_that_does_not_know_its_versions_loads(tmp_path):
    """null is what a profile built without NVML writes for its driver, and loads as None."""
    from nasutil.predictor.profile import load_profile

    profile = load_profile(_damaged_profile(tmp_path, lambda d: d.update(driver_version=None, torch_version=None)))
    assert profile.driver_version is None and profile.torch_version is None


@pytest.mark.parametrize("first", [
    {"driver_version": ["580"], "torch_version": "2" * 1000},
    {"space": "torchvision", "arch": "resnet50", "input_size": 224, "num_classes": 1000, "driver_version": "1.0",
     "torch_version": "0.1"},
], ids=["not text", "a row the fit leaves out"])
def test_a_fit_takes_its_versions_from_usable_rows_as_text(tmp_path, first):
    """The fit copied the first row's driver and torch versions, unchecked: a list or a megabyte of text went
    into the profile, and the versions of a zoo model's row that the fit leaves out."""
    from nasutil.predictor.fit import fit_profile
    from nasutil.predictor.training_data import read_measurements

    good = _fast_pass_rows(300)
    rows = read_measurements([_results_file(tmp_path, [{**good[0], **first}] + good[1:])])
    profile = fit_profile(rows, features="encoding")
    assert (profile.driver_version, profile.torch_version) == (good[1]["driver_version"], good[1]["torch_version"])
    assert good[1]["driver_version"] and good[1]["torch_version"]


def _repeat(key, index, where):
    """A change that puts a copy of data[key][index] (with a time or model of its own) at `where` in data[key]."""
    import copy

    def change(data):
        entries = data[key] if key != "ops" else data["operators"][0]["ops"]
        twin = copy.deepcopy(entries[index])
        if key == "ops":
            twin[-1] = twin[-1] * 3  # the same op, another time: which one counted depended on the reader
        elif key == "learned":
            twin["features"] = "encoding"
        entries.insert(where, twin)
    return change


@pytest.mark.parametrize("change, message", [
    (_repeat("ops", 3, 5), (r"operators\[0\]\.ops\[5\] repeats the op of operators\[0\]\.ops\[3\] \(\w+ .*\): "
                            r"a table times each op once")),
    (_repeat("operators", 1, 4), (r"operators\[4\] repeats the configuration of operators\[1\] \(fp16/256/eager\): "
                                  r"a profile holds one operator table for each")),
    (_repeat("learned", 2, 12), (r"learned\[12\] repeats the space and configuration of learned\[2\] \(mbconv fp16 "
                                 r"batch 1 cudagraph\): a profile holds one learned model for each")),
], ids=["op", "table", "learned model"])
def test_a_profile_that_gives_one_thing_twice_is_refused_naming_both(cli, tmp_path, change, message):
    """Two rows for one op, two tables for one configuration, two learned models for one space and configuration
    were loaded without a word: the op's last time counted, the first learned model answered, and predictions
    read the last table while the check for ops it never timed read the first."""
    r = cli("predict", "nb201", "--sample", "1", "--profile", _damaged_profile(tmp_path, change))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-800:]
    assert re.search(f"malformed device profile: {message}", r.stderr), r.stderr


@pytest.mark.parametrize("text, key", [
    ('{"format":"nasutil-device-profile","version":2,"device_name":"NVIDIA H200","device_name":"NVIDIA A100"}',
     "device_name"),
    (('{"format":"nasutil-device-profile","version":2,"device_name":"NVIDIA H200","analytical":{"fp16/eager":{},'
      '"fp16/eager":{"launch_us":9.0}}}'), "fp16/eager"),
], ids=["top level", "nested"])
def test_a_profile_file_that_gives_a_key_twice_is_refused(cli, tmp_path, text, key):
    """JSON keeps the last of two values of one key without a word: a profile naming its device twice was
    loaded under the second name."""
    from nasutil.predictor.profile import load_profile

    path = tmp_path / "twice.json"
    path.write_text(text)
    with pytest.raises(NasutilError, match=f"gives the key {key!r} twice in one object"):
        load_profile(str(path))
    r = cli("profile", "show", str(path))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and f"{key!r} twice" in r.stderr, r.stderr


def test_profile_build_builds_a_configuration_named_twice_once(monkeypatch, tmp_path):
    """`profile build --batch-size 1 --batch-size 1` timed every op twice and wrote two tables for one
    configuration; the profile holds one, and it loads again."""
    from types import SimpleNamespace

    import torch

    from nasutil.evaluator import run_model
    from nasutil.evaluator.counters import NvmlDevice
    from nasutil.predictor import op_timing
    from nasutil.predictor.op_tables import OperatorTable
    from nasutil.predictor.profile import load_profile
    from nasutil.predictor.profile_build import build_profile

    timed = []

    def measure_tables(ops, targets, device, progress=None):
        timed.extend(t.key for t in targets)
        return [OperatorTable(t.dtype, t.batch_size, t.mode, {op: 1.0 for op in ops}) for t in targets]

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the GPU work itself is stood in for
    monkeypatch.setattr(run_model, "resolve_device", lambda device: device)
    monkeypatch.setattr(run_model, "device_name", lambda device: "NVIDIA H200")
    monkeypatch.setattr(NvmlDevice, "for_torch_device", lambda device: SimpleNamespace(driver_version="1"))
    monkeypatch.setattr(op_timing, "measure_tables", measure_tables)
    path = tmp_path / "built.json"
    profile = build_profile("cuda", ["nb201", "nb201"], configs=[(1, "eager"), (256, "eager"), (1, "eager")],
                            op_networks=2, max_ops=10, networks=0, on_tables=lambda p: p.save(path),
                            log=lambda line: None, progress=False)
    assert timed == [t.key for t in profile.operators] == ["fp16/1/eager", "fp16/256/eager"]
    assert [t.key for t in load_profile(str(path)).operators] == ["fp16/1/eager", "fp16/256/eager"]
    assert "ops from nb201," in profile.source


def test_predictions_say_where_the_profile_was_not_validated():
    """Every space the shipped profile was fitted and validated on at fp16, batch 256, CUDA graph says
    so; darts and nb101 were never measured eagerly, and eager tables never timed their kinds of op."""
    from nasutil.predictor import PredictTarget
    from nasutil.predictor.registry import predict_many

    for space in ("nb201", "mbconv", "darts", "nb101"):
        p = predict_many(space, [a.to_string() for a in get_space(space).sample_many(3, seed=1)])
        assert all(x.validated and x.unvalidated_reason is None for x in p), space
    eager = PredictTarget("NVIDIA H200", "fp16", 256, "eager")
    for space in ("darts", "nb101"):
        p = predict_many(space, [a.to_string() for a in get_space(space).sample_many(3, seed=1)], eager)
        for x in p:
            assert not x.validated and f"never validated on {space}" in x.unvalidated_reason
            assert "never timed" in x.unvalidated_reason


def test_cli_predict_flags_unvalidated_predictions(cli):
    r = cli("predict", "darts", "--sample", "2", "--mode", "eager", "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["validated"] for row in rows] == [False, False]
    r = cli("predict", "darts", "--sample", "2", "--mode", "eager")
    assert r.returncode == 0 and "2 of 2 predictions are unvalidated" in r.stderr
    r = cli("predict", "darts", "--sample", "2")
    assert r.returncode == 0 and "unvalidated" not in r.stderr
    r = cli("predict", "nb201", "--sample", "2")
    assert r.returncode == 0 and "unvalidated" not in r.stderr


def test_a_fit_with_too_few_architectures_names_the_largest_group_and_the_setting(tmp_path):
    """A user fitting 16 CPU measurements read "no group has 50 or more" and nothing of how to fit them."""
    import csv

    from nasutil.predictor.fit import fit_profile
    from nasutil.predictor.training_data import read_measurements

    few = tmp_path / "few.csv"
    with open(RESULTS / "throughput_fast_w1.csv", newline="") as fh, open(few, "w", newline="") as out:
        reader = csv.DictReader(fh)
        writer = csv.DictWriter(out, reader.fieldnames)
        writer.writeheader()
        rows = [row for _, row in zip(range(6), reader)]
        writer.writerows(rows)
    with pytest.raises(NasutilError, match=r"the largest, nb201 fp16 256 cudagraph, has [1-6] \(min_rows, --min-rows of "
                                                r"nasutil profile fit, sets how many a fit needs\)"):
        fit_profile(read_measurements([few]))  # 6 rows, fewer distinct archs at a steady clock


def test_the_python_api_refuses_a_wrong_target_archs_or_a_missing_option_in_one_line():
    """predict_many took a tuple for a target, None or one string for archs, another space's Arch, and a kind
    missing an option it needs, and failed with AttributeError or TypeError from deep inside."""
    from nasutil.predictor import predict_many

    target = PredictTarget("NVIDIA H200", "fp16", 256, "cudagraph")
    cells = get_space("nb201").sample_many(2, seed=1)
    other = get_space("mbconv").sample_many(1, seed=1)
    cases = [(("nb201", cells, tuple(target.__dict__.values())), {}, "target must be a PredictTarget"),
             (("nb201", None, target), {}, "archs must be a list of architectures"),
             (("nb201", cells[0].to_string(), target), {}, "put one arch in a list"),
             (("nb201", [cells[0], other[0]], target), {}, "not an architecture of nb201 (MBConvArch)"),
             (("mbconv", cells, target), {}, "not an architecture of mbconv (NB201Arch)"),
             (("nb201", cells, target), {"predictor": "table"}, "predictor 'table' needs path")]
    for args, options, says in cases:
        with pytest.raises(NasutilError, match=re.escape(says)):
            predict_many(*args, **options)
    assert len(predict_many("nb201", (c.to_string() for c in cells), target)) == 2  # any iterable of archs
