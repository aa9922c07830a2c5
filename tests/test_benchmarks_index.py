"""BENCHMARKS.md's index names every benchmark script and every committed result file, and names nothing
that is not there: a result file nobody can find, or an index row left behind by a rename, fails here."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RESULTS = BENCHMARKS / "results"


def index_rows(text: str) -> list[tuple[str, str, list[str]]]:
    """(script, section, result globs) for each row between the index markers."""
    match = re.search(r"<!-- index -->\n(.*?)<!-- /index -->", text, re.S)
    if match is None:
        raise AssertionError("BENCHMARKS.md has no <!-- index --> ... <!-- /index --> table")
    rows = []
    for line in match.group(1).splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        script, section, files = cells[0].strip("`"), cells[1], re.findall(r"`([^`]+)`", cells[2])
        rows.append((script, section, files))
    return rows


def index_problems(text: str, scripts: list[str], results: list[str]) -> list[str]:
    rows = index_rows(text)
    headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
    problems = []
    named = {script for script, _, _ in rows}
    problems += [f"script {s} is not in the index" for s in scripts if s not in named]
    problems += [f"index names {s}, which is not in benchmarks/" for s in named if s not in scripts]
    problems += [f"{script}: no section titled {section!r}" for script, section, _ in rows if section not in headings]
    globs = [pattern for _, _, files in rows for pattern in files]
    problems += [f"result file {r} matches no row of the index" for r in results
                 if not any(fnmatch.fnmatch(r, g) for g in globs)]
    problems += [f"index names {g}, which matches no result file" for g in globs
                 if not any(fnmatch.fnmatch(r, g) for r in results)]
    return problems


def test_the_index_names_every_script_and_result_file():
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    results = sorted(str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*") if p.is_file())
    assert index_problems((ROOT / "BENCHMARKS.md").read_text(), scripts, results) == []


@pytest.mark.parametrize("plant", ["new script", "new result", "stale row", "renamed section"])
def test_the_index_check_fails_on_a_planted_gap(plant):
    text = (ROOT / "BENCHMARKS.md").read_text()
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py"))
    results = sorted(str(p.relative_to(RESULTS)) for p in RESULTS.rglob("*") if p.is_file())
    if plant == "new script":
        scripts.append("new_bench.py")
    elif plant == "new result":
        results.append("h200/new_bench.json")
    elif plant == "stale row":
        scripts.remove("startup.py")
    else:
        text = text.replace("## Start-up (CPU machine, 2 cores)", "## Start-up")
    assert index_problems(text, scripts, results) != []
