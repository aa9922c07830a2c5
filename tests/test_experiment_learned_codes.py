"""The learned-codes experiment's README quotes what its committed parity-search and serving results say."""

import csv
import json
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1] / "experiments" / "learned_codes"
RESULTS = HERE / "results" / "parity_search"


@pytest.fixture(scope="module")
def readme() -> str:
    return (HERE / "README.md").read_text()


def test_the_serving_table_is_the_committed_one(readme):
    rows = list(csv.DictReader((RESULTS / "serving.csv").open()))
    assert {r["way"] for r in rows} == {"unprotected", "replicated", "coded"}
    for r in rows:
        way = r["way"] if r["way"] != "coded" else "coded (ResNet-18 parity)"
        cells = [f"{float(r['p50_ms']):.3f}", f"{float(r['p99_ms']):.3f}", f"{float(r['queries_per_s']):,.0f}",
                 f"{100 * float(r['accuracy']):.2f}%", f"{float(r['replay_ms']):.3f}"]
        assert f"| {way} | " + " | ".join(cells) + " |" in readme, (way, cells)
        if r["way"] == "coded":
            assert float(r["rebuilt_accuracy"]) < float(r["accuracy"])  # the rebuilt half is the weaker half


def test_the_parity_search_figures_are_the_committed_ones(readme):
    summary = json.loads((RESULTS / "summary.json").read_text())
    trials = list(csv.DictReader((RESULTS / "trials.csv").open()))
    baseline, best = summary["baseline"], summary["most_accurate"]
    assert f"**{baseline['test_degraded_accuracy']:.2f}%**" in readme
    assert f"{baseline['latency_ms']:.3f} ms ({baseline['plain_loop_ms']:.3f})" in readme
    assert f"{best['test_degraded_accuracy']:.2f}%" in readme and best["arch"].replace("|", "\\|") in readme
    assert f"{best['latency_ms']:.3f} ms ({best['plain_loop_ms']:.3f})" in readme
    assert f"trained {len(trials)} candidates" in readme and summary["trained_candidates"] == len(trials)
    # the README's answer: nothing searched reached the baseline within the tolerance
    assert summary["picked"] is None and summary["at_equal_accuracy"] == 0
    assert max(float(t["test_degraded_accuracy"]) for t in trials) < baseline["test_degraded_accuracy"] - 0.5


def test_the_flops_and_times_of_the_searched_cells_are_the_trials(readme):
    trials = list(csv.DictReader((RESULTS / "trials.csv").open()))
    baseline = json.loads((RESULTS / "summary.json").read_text())["baseline"]
    flops = [float(t["flops_per_query"]) for t in trials]
    times = [float(t["latency_ms"]) for t in trials]
    fewer = (baseline["flops_per_query"] / max(flops), baseline["flops_per_query"] / min(flops))
    middle = [t for t in times if 0.9 <= t <= 2.1]
    text = " ".join(readme.split())
    assert f"do {fewer[0]:.0f}-{fewer[1]:.0f}x fewer FLOPs" in text
    assert f"({min(flops) / 1e6:.0f}-{max(flops) / 1e6:.0f} M against {baseline['flops_per_query'] / 1e6:.0f} M" in text
    assert f"and {len(middle)} of the {len(trials)} take 0.9-2.1 ms" in text
