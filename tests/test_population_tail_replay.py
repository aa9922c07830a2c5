"""benchmarks/population_tail.py's reading of a recorded run: which trials it trains again, when, and where it
cuts them (the replay itself needs a GPU and is run as a benchmark)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from population_tail import RUNGS, CutAt, recorded_work  # noqa: E402

from nasutil.search.controller import StoppedEarly  # noqa: E402

RECORDED = (ROOT / "benchmarks" / "results" / "h100" / "population" / "copies_s146"
            / "population_search_b64_s146_runs.jsonl")


def _run(name: str) -> dict:
    return next(r for r in map(json.loads, RECORDED.read_text().splitlines()) if r["run"] == name)


def test_a_recorded_runs_trained_trials_are_lined_up_with_their_architectures_in_the_order_asked():
    run = _run("p16-pareto-qa")
    work = recorded_work(run)
    trained = sorted((t for t in run["timeline"]["trials"] if t[3] > 0), key=lambda t: t[0])
    assert len(work) == len(run["work"]) == len(trained) == 44  # 4 of 48 were pruned before training
    assert [w[0] for w in work] == sorted(w[0] for w in work)  # in the order asked
    by_start = {t[1]: t for t in trained}
    for at, arch, share in work:  # each architecture with its own trial's start and training
        trial = by_start[at]
        assert (arch, share) == tuple(run["work"][trained.index(trial)])
    assert sum(w[2] for w in work) == pytest.approx(sum(e for _, e in run["work"]))


def test_a_replayed_trial_is_cut_at_the_rung_where_it_was_cut():
    for share, cut_at in ((0.1111, RUNGS[0]), (0.3333, RUNGS[1])):
        reporter = CutAt(share)
        for fraction in RUNGS:
            if fraction < cut_at:
                reporter.report_rung(fraction, 50.0)  # goes on
        with pytest.raises(StoppedEarly):
            reporter.report_rung(cut_at, 50.0)
    trained = CutAt(1.0)
    for fraction in RUNGS:
        trained.report_rung(fraction, 50.0)  # trained to the end: never cut
    trained.report(1, 80.0)


def test_a_mismatched_record_is_refused():
    run = _run("p16-pareto-qa")
    with pytest.raises(SystemExit, match="trained trials"):
        recorded_work({**run, "work": run["work"][:-1]})
