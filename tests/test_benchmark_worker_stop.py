"""BENCHMARKS.md's "Stopping a measuring worker" held to worker_stop.py's result files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_benchmark_step_kernels import _flat, _table  # the same markdown readers

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "cpu" / "worker_stop"
TITLE = "### Stopping a measuring worker (CPU machine, 2 cores)"


def _section() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    start = text.index(TITLE)
    return text[start:text.index("\n### ", start + 4)]


def _seed_148_runs() -> list[dict]:
    folder = ROOT / "benchmarks" / "results" / "h100" / "population" / "join_s148"
    return [json.loads(line) for f in sorted(folder.glob("*_runs.jsonl")) for line in f.open()]


def test_the_worker_stop_table_and_notes_are_their_result_files():
    runs = {code: json.loads((RESULTS / f"{name}.json").read_text())
            for code, name in (("before (5f08e54)", "worker_stop_before"), ("after", "worker_stop"))}
    expected = []
    for code, run in runs.items():
        assert run["device"] == "cpu" and run["cpus"] == 2 and run["repeats"] == 6
        times, median = run["stop_s"], run["median_s"]
        expected.append([code, f"{median['nasutil']:.3f}", f"{min(times['nasutil']):.3f}-{max(times['nasutil']):.3f}",
                         f"{median['plain']:.3f}", f"{min(times['plain']):.3f}-{max(times['plain']):.3f}"])
    section = _section()
    assert _table(section) == expected
    before, after = runs["before (5f08e54)"]["median_s"], runs["after"]["median_s"]
    flat = _flat(section)
    assert (f"The worker stopped {before['nasutil'] / after['nasutil']:.0f}x sooner: {after['nasutil']:.3f} s against "
            f"{before['nasutil']:.3f} s, and the plain process's shutdown ({after['plain']:.3f} and "
            f"{before['plain']:.3f} s in the two runs)") in flat
    assert after["nasutil"] < after["plain"] / 5  # the reference still pays the shutdown the worker skips
    ends = [r["after_last_trial_s"] for r in _seed_148_runs()]
    assert f"every run of seeds 147 and 148 spent {min(ends):.2f}-{max(ends):.2f} s after its last trial" in flat


def test_worker_stop_refuses_no_repeats_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "worker_stop.py"), "--device", "cpu",
                           "--repeats", "0", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--repeats must be at least 1" in done.stderr
    assert "Traceback" not in done.stderr
