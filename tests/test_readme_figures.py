"""README.md's figures that come from committed result files are checked against those files: a figure
that drifts from its data fails here (the experiments' own READMEs have their tests beside them)."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme() -> str:
    return " ".join((ROOT / "README.md").read_text().split())  # line breaks do not matter


def test_the_survey_line_quotes_its_data():
    summary = json.loads((ROOT / "experiments" / "survey" / "results" / "summary.json").read_text())
    with (ROOT / "experiments" / "survey" / "results" / "counters_b256.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    sm = statistics.median(float(r["counter_sm_activity"]) for r in rows)
    gpu_util = {float(r["counter_nvml_gpu_util"]) for r in rows}
    text = readme()
    assert f"SM activity has a median of {sm:.1f}%" in text
    assert f"`utilization.gpu` reads {min(gpu_util):.0f}%" in text and len(gpu_util) == 1
    worst = summary["worst_util_b256"].split(" ")
    best = summary["best_util_b256"].split(" ")
    assert f"runs from {worst[0]} {worst[1]} to {best[0]} {best[1]}, with a median of {summary['median_util_b256']}" in text


def test_the_nb201_study_line_quotes_its_data():
    batch = json.loads((ROOT / "experiments" / "nb201_study" / "results" / "summary.json").read_text())["batches"]["256"]
    at_20 = next(t for t in batch["thresholds"] if abs(t["quantile"] - 0.2) < 1e-9)
    error = batch["prediction_error"]
    text = readme()
    assert f"all {batch['measured_cells']:,} NAS-Bench-201 cells measured at batch 256" in text
    assert f"No cell exceeds {100 * batch['utilization']['max']:.2f}% utilization (median " \
           f"{100 * batch['utilization']['median']:.2f}%)" in text
    assert at_20["pareto_kept"] == at_20["pareto_total"] == batch["pareto_cells"]
    assert f"threshold at {100 * at_20['threshold']:.2f}% removes {at_20['removed']:.0%} of the space and keeps all " \
           f"{batch['pareto_cells']} Pareto-optimal cells" in text
    assert error["within_10pct"] == 1.0
    assert f"within +-10% on all {error['cells']:,} cells it was not fitted on (MAPE {100 * error['mape']:.2f}%)" in text


def test_the_pruning_line_quotes_the_measured_scoring():
    summary = json.loads((ROOT / "experiments" / "nb201_pruning" / "results" / "measured" /
                          "measured_summary.json").read_text())["by_sampler"]
    saved = [summary[f"random@{b}"]["trainings_saved_mean"] for b in (150, 300)]
    worst = min(summary[f"random@{b}"]["hv_ratio_measured_min"] for b in (150, 300))
    others = [summary[f"{s}@{b}"] for s in ("nsga2", "tpe") for b in (150, 300)]
    text = readme()
    assert f"random search keeps that promise ({100 * min(saved):.1f}-{100 * max(saved):.1f}% fewer trainings, no seed " \
           f"below {worst:.3f})" in text
    low, high = min(e["trainings_saved_mean"] for e in others), max(e["trainings_saved_mean"] for e in others)
    lowest, highest = min(e["hv_ratio_measured_min"] for e in others), max(e["hv_ratio_measured_min"] for e in others)
    assert f"NSGA-II and TPE save only {100 * low:.0f}-{100 * high:.0f}% and fall to {lowest:.2f}-{highest:.2f}" in text


def test_the_packing_figures_are_the_colocation_experiments():
    """The experiment's own README is checked against packing.csv by its test; this one keeps README.md
    in step with it."""
    table = (ROOT / "experiments" / "colocation" / "README.md").read_text()
    gains = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("1", "32") and cells[3].endswith("x"):
            gains[cells[0]] = cells[3]
    assert set(gains) == {"1", "32"}
    assert (f"ran every candidate once {gains['1']} faster than random groups of 8 at batch 1 and {gains['32']} at "
            f"batch 32") in readme()


def test_the_population_line_quotes_its_runs():
    folder = ROOT / "benchmarks" / "results" / "h200" / "population"
    runs = [json.loads(line) for name in ("population_search_first_b64_t64_s21_printed.jsonl",
                                          "population_search_b64_s22_runs.jsonl")
            for line in (folder / name).open()]

    def rate(run: str, seed: int) -> float:
        return next(r["candidates_per_gpu_hour"] for r in runs if r["run"] == run and r["seed"] == seed)

    def over(run: str, base: str) -> str:
        return " and ".join(f"{rate(run, s) / rate(base, s):.2f}x" for s in (21, 22))

    text = readme()
    assert f"16 at once with `halving=pareto` ended {over('p16-pareto', 'p1')} as many candidates" in text
    eager = " and ".join(f"{rate('p16-pareto', s) / rate('p1-eager', s):.1f}x" for s in (21, 22))
    assert f"{eager} a plain eager loop one at a time; 64 at once {over('p64-pareto', 'p1')}" in text
    seed22 = [r for r in runs if r["seed"] == 22]
    top = max(p[1] for r in seed22 for p in r["points"])
    from nasutil.pareto import hypervolume_2d

    volume = {r["run"]: hypervolume_2d([(a, t / top) for a, t in r["points"]], (0.0, 0.0)) for r in seed22}
    ratios = f"{volume['p16-pareto'] / volume['p1']:.2f} and {volume['p64-pareto'] / volume['p1']:.2f}"
    assert f"the populations' hypervolume was {ratios} of one-at-a-time's" in text


def test_the_command_costs_are_the_measured_ones():
    with (ROOT / "benchmarks" / "results" / "cpu" / "command_cost" / "command_cost.csv").open(newline="") as f:
        measured = list(csv.DictReader(f))
    text = readme()
    assert measured and all(r["exit_code"] == "0" for r in measured)
    for r in measured:
        assert (f"| `{r['command']}` | {float(r['wall_s']):.0f} s | {r['trials']} | {float(r['s_per_trial']):.2f} |"
                in text), r["command"]
