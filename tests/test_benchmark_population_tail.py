"""BENCHMARKS.md's "The last members of a search" held to population_tail.py's result files."""

from __future__ import annotations

import json
from pathlib import Path

from test_benchmark_step_kernels import _flat, _table  # the same markdown readers

ROOT = Path(__file__).resolve().parents[1]
TAIL = ROOT / "benchmarks" / "results" / "h100" / "population_tail"
TITLE = "The last members of a search: its training replayed, one step a round against steps in proportion (H100)"
#: each way of stepping in proportion that was replayed: its result folder and its name in the table
WAYS = {"skip_rounds": "skip rounds", "extra_steps": "extra steps"}
RUNS = ("p16-pareto-qa", "p64-pareto-qa")


def _section() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    start = text.index(f"### {TITLE}")
    return text[start:text.index("\n### ", start + 4)]


def _results() -> dict[tuple[str, str], dict]:
    return {(way, run): json.loads((TAIL / way / f"tail_{run}.json").read_text())
            for way in WAYS if (TAIL / way).exists() for run in RUNS}


def test_the_replay_table_is_its_result_files():
    results = _results()
    assert ("skip_rounds", "p16-pareto-qa") in results
    expected = []
    for (way, run), result in results.items():
        assert result["device"] == "NVIDIA H100 80GB HBM3" and result["failed"] == 0 and result["run"] == run
        for arm in result["arms"]:
            expected.append([WAYS[way], f"`{run}`", "in proportion" if arm["finish_together"] else "one a round",
                             f"{arm['span_s']:.2f}", f"{arm['membership_span_s']:.2f}",
                             f"{arm['members_time_mean']:.1f}", f"{arm['members_by_tenth'][-1]:.2f}",
                             f"{arm['rounds']:,}", f"{arm['finishing_rounds']:,}"])
            assert abs(arm["span_s"] - arm["membership_span_s"]) < 0.08  # the two clocks
            assert (arm["finishing_rounds"] > 0) == arm["finish_together"]
    assert _table(_section()) == expected


def test_the_skip_rounds_notes_are_their_result_files():
    results, flat = _results(), _flat(_section())
    p16, p64 = results[("skip_rounds", "p16-pareto-qa")], results[("skip_rounds", "p64-pareto-qa")]
    assert (f"the replays took {p16['median_span_s']['together']:.2f} s against {p16['median_span_s']['apart']:.2f} "
            f"(medians of two; one a round {p16['apart_over_together']:.3f} of the time in proportion)") in flat
    assert (f"{p64['median_span_s']['together']:.2f} against {p64['median_span_s']['apart']:.2f} s at 64 places "
            f"({p64['apart_over_together']:.3f})") in flat
    together = [a["members_by_tenth"][-1] for a in p16["arms"] if a["finish_together"]]
    apart = [a["members_by_tenth"][-1] for a in p16["arms"] if not a["finish_together"]]
    assert (f"{min(together):.1f}-{max(together):.1f} members at once in the last tenth of 16 places against "
            f"{min(apart):.1f}-{max(apart):.1f} one a round") in flat
    assert p16["trials"] == 44 and p64["trials"] == 45
    assert f"44 and 45 trials, {p16['epochs_of_work']:.1f} and {p64['epochs_of_work']:.1f} epochs" in flat
