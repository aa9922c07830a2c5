"""Prune by prediction, score by measurement: the shipped measured NAS-Bench-201 table, `evaluator=table`,
`objectives.scored_on`, and a prune policy that judges a candidate against the measured front."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import optuna
import pytest

from nasutil.cli.search_command import main
from nasutil.data.measured import measured_table
from nasutil.data.nasbench201 import accuracy_table
from nasutil.errors import NasutilError
from nasutil.predictor import Prediction
from nasutil.search.prune import DominatedThroughput, History, Seen, history_from

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "experiments" / "nb201_study" / "results" / "measured_all_b256.csv"
ARGS = ["predictor=analytical", "plots=false", "progress=false", "prune=none"]


def study_of(run_dir: Path) -> optuna.Study:
    return optuna.load_study(study_name=None, storage=f"sqlite:///{run_dir / 'study.db'}")


def test_the_shipped_table_holds_every_cell_as_the_study_measured_it():
    table = measured_table("nb201_h200")
    assert set(table.rows) == set(accuracy_table())
    assert (table.device_name, table.dtype, table.batch_size, table.mode, table.space) == (
        "NVIDIA H200", "fp16", 256, "cudagraph", "nb201")
    with SOURCE.open(newline="") as f:
        for row in csv.DictReader(f):
            figures = table.figures(row["arch"])
            assert figures["latency_ms"] == pytest.approx(float(row["latency_ms"]), rel=1e-5)
            assert figures["throughput_per_s"] == pytest.approx(float(row["throughput_per_s"]), rel=1e-6)
            assert figures["utilization"] == pytest.approx(float(row["utilization"]), rel=1e-5)


def test_a_search_prunes_by_prediction_and_scores_trained_trials_by_measurement(tmp_path):
    table = measured_table("nb201_h200")
    run_dir = tmp_path / "run"
    assert main([*ARGS, "evaluator=table", "n_trials=12", f"hydra.run.dir={run_dir}"]) == 0
    trials = study_of(run_dir).trials
    assert len(trials) == 12
    for t in trials:
        measured = table.figures(t.user_attrs["arch"])["throughput_per_s"]
        assert t.user_attrs["hardware_source"] == "measured"
        assert t.values[1] == pytest.approx(measured) and t.values[1] != pytest.approx(
            t.user_attrs["predicted_throughput_per_s"])
    with (run_dir / "trials.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert all(float(r["throughput_per_s"]) == pytest.approx(float(r["measured_throughput_per_s"])) for r in rows)


def test_scored_on_predicted_keeps_the_measurement_beside_the_prediction(tmp_path):
    run_dir = tmp_path / "run"
    assert main([*ARGS, "evaluator=table", "objectives.scored_on=predicted", "n_trials=6",
                 f"hydra.run.dir={run_dir}"]) == 0
    for t in study_of(run_dir).trials:
        assert t.user_attrs["hardware_source"] == "predicted"
        assert t.values[1] == pytest.approx(t.user_attrs["predicted_throughput_per_s"])
        assert t.user_attrs["measured_throughput_per_s"] > 0


@pytest.mark.parametrize("args, message", [
    (["objectives.scored_on=measured", "evaluator=none"], "objectives.scored_on=measured needs an evaluator"),
    (["objectives.scored_on=sometimes"], "objectives.scored_on must be one of auto, measured, predicted"),
    (["evaluator=table", "target.batch_size=64"], "measured at batch_size 256, the search's target is 64"),
    (["evaluator=table", "search_space=nb101", "trainer=torch"], "holds nb201 networks, not 'nb101'"),
    (["evaluator=table", "evaluator.table=no/such/file.csv"], "no measured table 'no/such/file.csv'"),
])
def test_a_measured_objective_that_cannot_hold_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert main([*ARGS, *args, "n_trials=3", f"hydra.run.dir={tmp_path / 'run'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err, err


def test_a_csv_the_evaluator_wrote_is_a_table_and_a_bad_one_is_refused(tmp_path):
    good = tmp_path / "measured.csv"
    arch = next(iter(accuracy_table()))
    good.write_text("space,arch,status,device_name,dtype,batch_size,mode,latency_ms,throughput_per_s,utilization\n"
                    f"nb201,{arch},ok,NVIDIA H200,fp16,256,cudagraph,2.0,128000,0.02\n"
                    f"nb201,other,failed,NVIDIA H200,fp16,256,cudagraph,,,\n")
    table = measured_table(str(good))
    assert table.figures(arch) == {"latency_ms": 2.0, "throughput_per_s": 128000.0, "utilization": 0.02}
    assert table.space == "nb201" and table.batch_size == 256 and table.figures("other") is None
    bad = tmp_path / "bad.csv"
    bad.write_text(f"arch,latency_ms,throughput_per_s,utilization\n{arch},fast,1,1\n")
    with pytest.raises(NasutilError, match="row 2: latency_ms is not a number"):
        measured_table(str(bad))
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("arch,batch_size,latency_ms,throughput_per_s,utilization\na,1,1,1,1\nb,256,1,1,1\n")
    with pytest.raises(NasutilError, match="mixes configurations: batch_size is 1 and 256"):
        measured_table(str(mixed))
    odd = tmp_path / "odd_batch.csv"  # `1.0` and ` 1` once read as unknown: scored at any batch, unchecked
    odd.write_text(f"arch,batch_size,latency_ms,throughput_per_s,utilization\n{arch},1.0,1,1,1\n")
    with pytest.raises(NasutilError, match="batch_size '1.0' is not a whole number"):
        measured_table(str(odd))
    odd.write_text(f"arch,batch_size,latency_ms,throughput_per_s,utilization\n{arch}, 1,1,1,1\n")
    assert measured_table(str(odd)).batch_size == 1


def test_an_arch_measured_twice_counts_the_median_of_its_readings(tmp_path):
    """A file that `measure --out` appended to twice holds an arch twice: the last reading once won silently."""
    arch = next(iter(accuracy_table()))
    twice = tmp_path / "twice.csv"
    twice.write_text("arch,latency_ms,throughput_per_s,utilization\n" + "".join(
        f"{arch},{ms},{256_000 / ms},0.02\n" for ms in (2.0, 2.2, 0.001)))
    assert measured_table(str(twice)).figures(arch)["latency_ms"] == 2.0


def cand(throughput: float) -> Prediction:
    return Prediction("nb201", "arch", "test", "GPU", "fp16", 256, "cudagraph", 1, 256_000 / throughput, throughput,
                      0.02, 1, expected_error=0.02)


def test_the_policy_judges_a_candidate_against_the_measured_front_with_the_error_seen_near_it():
    """Trained: a front member predicted at 2,000/s that measured 2,050/s (92%), and three of about
    1,800/s predicted that measured 10-12% faster than predicted (85%). A candidate predicted at 1,900/s
    could measure 2,128/s, faster than the front member: it is trained. Scored on predictions (no
    measurement), the same history prunes it, allowing only the held-out 2%."""
    measured = [Seen(2000.0, 1.0, 0.02, 92.0, 2050.0), Seen(1800.0, 1.0, 0.02, 85.0, 2000.0),
                Seen(1810.0, 1.0, 0.02, 86.0, 2010.0), Seen(1790.0, 1.0, 0.02, 84.0, 1970.0),
                Seen(1900.0, 1.0, 0.02, 85.5, 2110.0)]
    policy = DominatedThroughput(warmup_trials=4, band=0.1, min_neighbours=2, error_band=0.2)
    assert policy.decide(cand(1900.0), History(measured)) is None
    predicted_only = [Seen(s.throughput_per_s, s.latency_ms, s.utilization, s.accuracy) for s in measured]
    assert "throughput error allowed 2.0%" in policy.decide(cand(1900.0), History(predicted_only))
    # A candidate far slower than the front member is still pruned, its neighbours' error allowed.
    slow = measured + [Seen(1000.0, 1.0, 0.02, 80.0, 1010.0), Seen(1010.0, 1.0, 0.02, 81.0, 1020.0)]
    reason = policy.decide(cand(1005.0), History(slow))
    assert reason is not None and "2,050/s on the front" in reason


def test_history_takes_the_measured_throughput_of_trials_scored_on_it():
    records = [{"predicted_throughput_per_s": 1000.0, "predicted_latency_ms": 1.0, "accuracy": 90.0,
                "measured_throughput_per_s": 1100.0, "hardware_source": "measured"},
               {"predicted_throughput_per_s": 1000.0, "predicted_latency_ms": 1.0, "accuracy": 90.0,
                "measured_throughput_per_s": 1100.0, "hardware_source": "predicted"},
               {"predicted_throughput_per_s": 1000.0, "predicted_latency_ms": 1.0}]
    seen = history_from(records).seen
    assert [s.scored for s in seen] == [1100.0, 1000.0, 1000.0]
    assert seen[0].measured_error == pytest.approx(0.1) and seen[1].measured_error is None


def _table_without(path: Path, left_out: set[str]) -> Path:
    """The shipped H200 table as a CSV the evaluator wrote, less the cells `left_out`."""
    table = measured_table("nb201_h200")
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["space", "arch", "status", "device_name", "dtype", "batch_size", "mode", "latency_ms",
                         "throughput_per_s", "utilization"])
        for arch, figures in table.rows.items():
            if arch not in left_out:
                writer.writerow(["nb201", arch, "ok", table.device_name, "fp16", 256, "cudagraph",
                                 figures["latency_ms"], figures["throughput_per_s"], figures["utilization"]])
    return path


def test_a_cell_missing_from_a_users_table_is_scored_on_its_prediction_under_auto_and_fails_under_measured(
        tmp_path, capsys):
    """With scored_on=auto (measured where measured), a trained candidate that a user's table lacks failed its
    trial; it is scored on its prediction, and the trial, the summary and trials.csv say so."""
    first = tmp_path / "first"
    settings = [*ARGS, "evaluator=table", "n_trials=6", "seed=5"]
    assert main([*settings, f"hydra.run.dir={first}"]) == 0
    archs = [t.user_attrs["arch"] for t in sorted(study_of(first).trials, key=lambda t: t.number)]
    missing = set(archs[:2])
    table = _table_without(tmp_path / "partial.csv", missing)
    capsys.readouterr()

    run_dir = tmp_path / "auto"
    assert main([*settings, f"evaluator.table={table}", f"hydra.run.dir={run_dir}"]) == 0
    out = capsys.readouterr().out
    trials = study_of(run_dir).trials
    assert [t.user_attrs["arch"] for t in sorted(trials, key=lambda t: t.number)] == archs  # the same proposals
    for t in trials:
        assert t.state == optuna.trial.TrialState.COMPLETE
        if t.user_attrs["arch"] in missing:
            assert t.user_attrs["hardware_source"] == "predicted"
            assert t.user_attrs["unmeasured_reason"] == f"{t.user_attrs['arch']} is not in the measured table partial.csv"
            assert t.values[1] == pytest.approx(t.user_attrs["predicted_throughput_per_s"])
        else:
            assert t.user_attrs["hardware_source"] == "measured" and "unmeasured_reason" not in t.user_attrs
    assert json.loads((run_dir / "summary.json").read_text())["counts"]["unmeasured"] == 2
    assert "note: 2 trained trials had no measurement and were scored on their prediction" in out
    with (run_dir / "trials.csv").open(newline="") as f:
        assert sum(1 for r in csv.DictReader(f) if r["unmeasured_reason"]) == 2

    strict = tmp_path / "measured"
    assert main([*settings, f"evaluator.table={table}", "objectives.scored_on=measured",
                 f"hydra.run.dir={strict}"]) == 0
    failed = [t for t in study_of(strict).trials if t.state == optuna.trial.TrialState.FAIL]
    assert {t.user_attrs["arch"] for t in failed} == missing
    assert all(t.user_attrs["fail_reason"].startswith(f"{t.user_attrs['arch']} is not in the measured table ") and
               "objectives.scored_on=measured" in t.user_attrs["fail_reason"] for t in failed)
