"""benchmarks/survivor_reference.py pairs each measured survivor with the plain loop's reading of its cell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from survivor_reference import BATCH, compare, grouped, survivor_readings  # noqa: E402

A = "|skip_connect~0|+|none~0|none~1|+|none~0|none~1|none~2|"
B = "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|"


def _run_file(tmp_path):
    runs = [{"run": "p1", "seed": 7, "measurements": [
                {"arch": A, "throughput_per_s": 500_000.0, "sm_clock_mhz": 1980.0, "batch": 0, "in_batch": 0},
                {"arch": B, "throughput_per_s": None, "batch": 1, "in_batch": 0}]},
            {"run": "p16-pareto-qa", "seed": 7, "measurements": [
                {"arch": B, "throughput_per_s": 99_000.0, "sm_clock_mhz": 1965.0, "batch": 0, "in_batch": 0},
                {"arch": A, "throughput_per_s": 520_000.0, "sm_clock_mhz": 1965.0, "batch": 0, "in_batch": 1},
                # a later trial of the same arch carries that reading over: not a reading of its own
                {"arch": A, "throughput_per_s": 520_000.0, "sm_clock_mhz": 1965.0, "batch": 0, "in_batch": 1}]},
            {"run": "p1-eager", "seed": 7}]
    path = tmp_path / "x_runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in runs))
    return path


def test_every_reading_with_a_throughput_is_taken_once_with_its_place(tmp_path):
    rows = survivor_readings([_run_file(tmp_path)])
    assert [(r["run"], r["arch"], r["in_batch"]) for r in rows] == [("p1", A, 0), ("p16-pareto-qa", B, 0),
                                                                   ("p16-pareto-qa", A, 1)]


def test_ratios_divide_the_evaluators_throughput_by_the_loops_and_group_by_place(tmp_path):
    rows = survivor_readings([_run_file(tmp_path)])
    loop_ms = {A: BATCH / 500_000.0 * 1e3, B: BATCH / 100_000.0 * 1e3}
    compared = compare(rows, loop_ms)
    assert [round(r["ratio"], 4) for r in compared] == [1.0, 0.99, 1.04]
    groups = grouped(compared)
    assert groups["all"]["within_1pct"] == 2 and groups["all"]["within_3pct"] == 2
    assert groups["all"]["worst_ratio"] == pytest.approx(1.04)
    assert groups["first_in_batch"]["readings"] == 2 and groups["later_in_batch"]["readings"] == 1
    assert groups["runs"]["p16-pareto-qa"]["median_ratio"] == pytest.approx((0.99 + 1.04) / 2)


def test_a_cell_the_loop_did_not_time_is_left_out(tmp_path):
    rows = survivor_readings([_run_file(tmp_path)])
    assert [r["arch"] for r in compare(rows, {A: 0.512})] == [A, A]
    assert grouped([])["all"] == {"readings": 0}


@pytest.mark.parametrize("content", [None, "{not json\n", '{"run": "p1"}\n'])
def test_a_run_file_it_cannot_read_is_a_one_line_error(tmp_path, content):
    import subprocess

    path = tmp_path / "x_runs.jsonl"
    if content is not None:
        path.write_text(content)
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "survivor_reference.py"
    done = subprocess.run([sys.executable, str(script), str(path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "survivor_reference:" in done.stderr and not (tmp_path / "out").exists()
