"""The NAS-Bench-201 study's README quotes what its committed data say."""

import csv
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import load_script

STUDY = Path(__file__).resolve().parents[1] / "experiments" / "nb201_study"
RESULTS = STUDY / "results"


@pytest.fixture(scope="module")
def analyze():
    return load_script(STUDY / "analyze.py", "nb201_study_analyze")


@pytest.fixture(scope="module")
def readme() -> str:
    return " ".join((STUDY / "README.md").read_text().split())  # line breaks do not matter


def test_readme_quotes_every_headline_figure(analyze, readme):
    for key, text in analyze.headline(RESULTS).items():
        quoted = re.escape(" ".join(text.split()))
        # not as the tail of a longer number ("28%" must not match "1.28%")
        assert re.search(rf"(?<![\d.,]){quoted}", readme), f"README does not say {key}: {text!r}"


def test_readme_threshold_table_matches_the_data(analyze):
    assert analyze.threshold_table(RESULTS) in (STUDY / "README.md").read_text()


def test_cells_table_covers_the_space_and_agrees_with_the_measurements(analyze):
    cells = analyze.read_cells(RESULTS)
    assert len(cells["arch"]) == 15_625 == len(set(cells["arch"]))
    batch = analyze.saturating_batch(RESULTS)
    for b in (256, batch):
        util = cells[f"utilization_b{b}"]
        assert np.all((util > 0) & (util < 1))
        measured = ~np.isnan(cells[f"measured_ms_b{b}"])
        # where a cell was measured, its throughput comes from the measurement, not the prediction
        expected = b / (cells[f"measured_ms_b{b}"][measured] * 1e-3)
        assert np.allclose(cells[f"throughput_b{b}"][measured], expected, rtol=1e-4)
    raw = set()
    for path in analyze.b256_files(RESULTS):
        with path.open(newline="") as fh:
            raw |= {r["arch"] for r in csv.DictReader(fh) if r["status"] == "ok"}
    assert int((~np.isnan(cells["measured_ms_b256"])).sum()) <= len(raw)


def test_the_full_pass_covers_every_cell_once(analyze):
    with (RESULTS / analyze.FULL_PASS).open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["status"] == "ok"]
    assert len(rows) == len({r["arch"] for r in rows}) == 15_625


def test_front_mask_on_a_known_front(analyze):
    """The analysis's front (accuracy first, then throughput): of equal points only the first is kept."""
    accuracy = np.array([90.0, 80.0, 85.0, 70.0, 90.0, 80.0])
    throughput = np.array([100.0, 300.0, 200.0, 250.0, 50.0, 300.0])
    assert analyze.front_mask_2d(accuracy, throughput).tolist() == [True, True, True, False, False, False]


@pytest.mark.parametrize("setting, said", [("+all_settings.bogus=1", "unexpected keyword argument 'bogus'"),
                                           ("+all_settings.weights=gpu", "weights must be one of host, device")])
def test_a_bad_setting_for_the_full_pass_is_one_line_and_exit_code_2(tmp_path, setting, said):
    """A misspelt `all_settings` field is refused before any worker starts, and nothing is written."""
    out = tmp_path / "study"
    done = subprocess.run([sys.executable, str(STUDY / "measure.py"), "stages=[all]", setting, f"out={out}"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: all_settings:") and said in lines[0], done.stderr
    assert not (out / "measured_all_b256.csv").exists()
