"""BENCHMARKS.md's "Building a search" held to search_build.py's result files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_benchmark_step_kernels import _flat, _table  # the same markdown readers

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "cpu" / "search_build"
TITLE = "### Building a search: its data loaded beside the anchors' short search (CPU machine, 2 cores)"
KEYS = ("build_s", "anchors_s", "load_alone_s", "anchors_alone_s")


def _section() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    start = text.index(TITLE)
    return text[start:text.index("\n### ", start + 4)]


def _runs() -> dict[str, dict]:
    return {code: json.loads((RESULTS / f"{name}.json").read_text())
            for code, name in (("before", "search_build_before"), ("after", "search_build"))}


def _seed_148_runs() -> list[dict]:
    folder = ROOT / "benchmarks" / "results" / "h100" / "population" / "join_s148"
    return [json.loads(line) for f in sorted(folder.glob("*_runs.jsonl")) for line in f.open()]


def test_the_search_build_table_and_notes_are_their_result_files():
    runs, expected = _runs(), []
    for code, run in runs.items():
        assert run["cpus"] == 2 and run["device"] == "cpu" and len(run["repeats"]) == 6
        cells = [f"{run['median_s'][k]:.3f} ({min(r[k] for r in run['repeats']):.3f}-"
                 f"{max(r[k] for r in run['repeats']):.3f})" for k in KEYS]
        expected.append([code, *cells])
    section = _section()
    assert _table(section) == expected
    before, after = runs["before"]["median_s"], runs["after"]["median_s"]
    flat = _flat(section)
    assert (f"Building took {before['build_s'] - after['build_s']:.3f} s less ({after['build_s'] / before['build_s']:.2f}x "
            f"the time)") in flat
    assert (f"(their sum alone {before['load_alone_s'] + before['anchors_alone_s']:.3f} s, of a {before['build_s']:.3f} s "
            "build)") in flat
    builds = [r["phases_s"]["build_s"] for r in _seed_148_runs()]
    anchors = [r["phases_s"]["anchors_s"] for r in _seed_148_runs()]
    assert (f"spent {min(builds):.2f}-{max(builds):.2f} s building on an H100 in the runs of seeds 147 and 148, "
            f"{min(anchors):.2f}-{max(anchors):.2f} s of it finding the anchors") in flat
    together = after["load_alone_s"] + after["anchors_alone_s"]
    assert together > after["build_s"]  # the build now takes less than its two parts one after the other
    assert (f"the whole build took {after['build_s']:.3f} s, less than the two parts alone one after the other "
            f"({together:.3f} s), the anchors taking longer inside it ({after['anchors_s']:.3f} s against "
            f"{after['anchors_alone_s']:.3f} alone)") in flat


def test_search_build_refuses_a_missing_dataset_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "search_build.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env={"NASUTIL_DATA_DIR": str(tmp_path),
                                                                            "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "Fashion-MNIST's IDX files are not under" in done.stderr
    assert "Traceback" not in done.stderr
