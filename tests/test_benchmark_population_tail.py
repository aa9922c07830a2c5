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
            assert abs(arm["span_s"] - arm["membership_span_s"]) < (0.08 if way == "skip_rounds" else 0.14)  # two clocks
            assert (arm["finishing_rounds"] > 0) == arm["finish_together"]
    section = _section()
    calls = section[:section.index("**Joining in the order of reservations")].split("\n| stepping |")[1:]
    assert [row for call in calls for row in _table(call)] == expected  # the two calls' tables, one after the other


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


def test_the_extra_steps_notes_are_their_result_files():
    results, flat = _results(), _flat(_section())
    p16, p64 = results[("extra_steps", "p16-pareto-qa")], results[("extra_steps", "p64-pareto-qa")]
    together = [a["members_by_tenth"][-1] for a in p16["arms"] if a["finish_together"]]
    apart = [a["members_by_tenth"][-1] for a in p16["arms"] if not a["finish_together"]]
    assert (f"{min(together):.1f}-{max(together):.1f} members at once in the last tenth of 16 places against "
            f"{min(apart):.1f} one a round, and the replays took {p16['median_span_s']['together']:.2f} s against "
            f"{p16['median_span_s']['apart']:.2f} (medians of two; one a round {p16['apart_over_together']:.3f} of the "
            f"time in proportion); at 64 places {p64['median_span_s']['together']:.2f} against "
            f"{p64['median_span_s']['apart']:.2f} s (one replay each, {p64['apart_over_together']:.3f})") in flat
    assert min(apart) == max(apart) or f"{min(apart):.1f}" == f"{max(apart):.1f}"
    spans = sorted(a["span_s"] for a in p16["arms"] if a["finish_together"])
    assert f"({spans[0]:.2f} and {spans[1]:.2f} s in proportion)" in flat
    # neither way of stepping in proportion shortened a replay: the default stays one step a round
    assert all(r["apart_over_together"] < 1.01 for r in results.values())
    import yaml

    assert yaml.safe_load((ROOT / "conf" / "trainer" / "torch.yaml").read_text())["finish_together"] is False
    first = results[("skip_rounds", "p16-pareto-qa")]
    now = [a["span_s"] for a in p16["arms"] if not a["finish_together"]]
    then = [a["span_s"] for a in first["arms"] if not a["finish_together"]]
    assert (f"one a round took {min(now):.2f}-{max(now):.2f} s here against {min(then):.2f}-{max(then):.2f} s in the "
            "first call") in flat
    bound = [a["device_bound"] for a in p16["arms"]]
    assert f"{min(bound) * 100:.0f}-{max(bound) * 100:.0f}% of its time in the replays of 16 at once" in flat


#: the replays of p16-pareto-qa in the join-order call, in the order they ran: (folder, how members joined)
JOIN_ORDER = (("join_order/reservation_order_1", "in reservation order (first)"),
              ("extra_steps", "as soon as prepared"),
              ("join_order/reservation_order_2", "in reservation order (again)"))


def test_the_join_order_table_and_notes_are_their_result_files():
    text = (ROOT / "BENCHMARKS.md").read_text()
    marker = "**Joining in the order of reservations, or as soon as prepared.**"
    section = text[text.index(marker):text.index("### ", text.index(marker))]
    results = {name: json.loads((TAIL / folder / "tail_p16-pareto-qa.json").read_text()) for folder, name in JOIN_ORDER}
    expected = []
    for name, result in results.items():
        assert result["device"] == "NVIDIA H100 80GB HBM3" and result["failed"] == 0 and result["trials"] == 44
        for arm in result["arms"]:
            expected.append([name, "in proportion" if arm["finish_together"] else "one a round", f"{arm['span_s']:.2f}",
                             f"{arm['membership_span_s']:.2f}", f"{arm['members_time_mean']:.1f}",
                             f"{arm['members_by_tenth'][0]:.2f}", f"{arm['members_by_tenth'][-1]:.2f}"])
    assert _table(section) == expected
    flat = _flat(section)
    one = lambda name: [a for a in results[name]["arms"] if not a["finish_together"]]  # noqa: E731
    new, old = one("as soon as prepared"), one("in reservation order (first)") + one("in reservation order (again)")
    assert (f"one a round took {new[0]['span_s']:.2f} and {new[1]['span_s']:.2f} s joining as soon as prepared against "
            f"{old[0]['span_s']:.2f} and {old[1]['span_s']:.2f} s in reservation order") in flat
    firsts = [a["members_by_tenth"][0] for r in results.values() for a in r["arms"]]
    assert f"the first tenth held {min(firsts):.1f}-{max(firsts):.1f} members at once either way" in flat
    searches = ROOT / "benchmarks" / "results" / "h100" / "population"

    def first_tenths(folder: str) -> list[float]:
        return [r["population_activity"]["members_by_tenth"][0] for f in sorted((searches / folder).glob("*_runs.jsonl"))
                for r in map(json.loads, f.open()) if r["run"] != "p1"]

    now, then = first_tenths("join_s148"), first_tenths("lean_s143") + first_tenths("copies_s146")
    assert (f"their first tenths held {min(now):.1f}-{max(now):.1f} members at once, as the earlier seeds' did "
            f"({min(then):.1f}-{max(then):.1f} on seeds 143-147)") in flat
    waits = [r["population_activity"]["mean_turn_wait_ms"] for f in sorted((searches / "join_s148").glob("*_runs.jsonl"))
             for r in map(json.loads, f.open()) if r["run"] != "p1"]
    assert f"waited {min(waits):.0f}-{max(waits):.0f} ms on average for its turn), not in the order" in flat
