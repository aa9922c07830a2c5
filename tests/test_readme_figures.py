"""README.md's figures that come from committed result files are checked against those files: a figure
that drifts from its data fails here (the experiments' own READMEs have their tests beside them)."""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from test_benchmark_population import H100_SEED_FILES  # seeds 99-101 on the H100s, one at a time beside them
from test_benchmark_population import seeds_103_and_104

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
    summary = json.loads((ROOT / "experiments" / "nb201_pruning" / "results" / "measured_v2" /
                          "measured_summary.json").read_text())["by_sampler"]
    saved = [summary[f"random@{b}"]["trainings_saved_mean"] for b in (150, 300)]
    worst = min(summary[f"random@{b}"]["hv_ratio_measured_min"] for b in (150, 300))
    others = [summary[f"{s}@{b}"] for s in ("nsga2", "tpe") for b in (150, 300)]
    text = readme()
    assert f"random search keeps that promise ({100 * min(saved):.1f}-{100 * max(saved):.1f}% fewer trainings, no seed " \
           f"below {worst:.3f})" in " ".join(text.split())
    low, high = min(e["trainings_saved_mean"] for e in others), max(e["trainings_saved_mean"] for e in others)
    lowest, highest = min(e["hv_ratio_measured_min"] for e in others), max(e["hv_ratio_measured_min"] for e in others)
    assert f"NSGA-II and TPE save only {100 * low:.0f}-{100 * high:.0f}% and fall to {lowest:.2f}-{highest:.2f}" in " ".join(text.split())
    before = json.loads((ROOT / "experiments" / "nb201_pruning" / "results" / "measured" /
                         "measured_summary.json").read_text())["by_sampler"]
    earlier = [before[f"{s}@{b}"] for s in ("nsga2", "tpe") for b in (150, 300)]
    assert (f"(the earlier version: {100 * min(e['trainings_saved_mean'] for e in earlier):.0f}-"
            f"{100 * max(e['trainings_saved_mean'] for e in earlier):.0f}%, "
            f"{min(e['hv_ratio_measured_min'] for e in earlier):.2f}-{max(e['hv_ratio_measured_min'] for e in earlier):.2f})"
            in " ".join(text.split()))
    anchored = json.loads((ROOT / "experiments" / "nb201_pruning" / "results" / "measured_anchors" /
                           "measured_summary.json").read_text())["by_sampler"]
    worst = {b: [anchored[f"{s}@{b}"]["hv_ratio_measured_min"] for s in ("nsga2", "tpe")] for b in (150, 300)}
    kept = [e["trainings_saved_mean"] for e in anchored.values()]
    assert (f"their worst seeds rise to {min(worst[150]):.2f}-{max(worst[150]):.2f} at 150 trials and "
            f"{min(worst[300]):.2f}-{max(worst[300]):.2f} at 300, for {100 * min(kept):.0f}-{100 * max(kept):.0f}% "
            f"fewer trainings") in " ".join(text.split())
    fresh = {folder: json.loads((ROOT / "experiments" / "nb201_pruning" / "results" / folder /
                                 "measured_summary.json").read_text())["by_sampler"]
             for folder in ("measured_q60_reference", "measured_q60")}
    flat = " ".join(text.split())
    reference, changed = fresh["measured_q60_reference"], fresh["measured_q60"]
    assert (f"TPE at 300 trials ({100 * reference['tpe@300']['trainings_saved_mean']:.1f}% fewer trainings, worst seed "
            f"{reference['tpe@300']['hv_ratio_measured_min']:.3f}) but not for NSGA-II "
            f"({100 * reference['nsga2@300']['trainings_saved_mean']:.1f}%, worst "
            f"{reference['nsga2@300']['hv_ratio_measured_min']:.3f})") in flat
    assert (f"raised that to {100 * changed['tpe@300']['trainings_saved_mean']:.1f}% and "
            f"{changed['tpe@300']['hv_ratio_measured_min']:.3f} (TPE) and "
            f"{100 * changed['nsga2@300']['trainings_saved_mean']:.1f}% and "
            f"{changed['nsga2@300']['hv_ratio_measured_min']:.3f} (NSGA-II)") in flat
    low = min(changed[f"{s}@150"]["hv_ratio_measured_min"] for s in ("nsga2", "tpe"))
    assert f"lowered the worst seed at 150 to {low:.2f}" in flat


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


POPULATION = {device: ROOT / "benchmarks" / "results" / device / "population" for device in ("h200", "h100")}
H200_CALLS = {seed: (f"population_search_b64_s{seed}.csv",) for seed in (80, 84)}
H200_CALLS[96] = ("population_search_b64_wakes_s96.csv", "population_search_b64_wakes_p1_s96.csv")  # p1: a later call
H200_CALLS[82] = ("population_search_b256_s82.csv",)
H200_CALLS.update({seed: (f"population_search_b64_measured_s{seed}.csv",) for seed in (81, 83, 85)})
H100_CALLS = {seed: (name,) for seed, name in zip((99, 100, 101), H100_SEED_FILES)}
H100_CALLS["99 at batch 256"] = ("population_search_b256_measured_s99.csv",)
H100_CALLS.update({seed: ("prestart_s105/population_search_b64.csv",) for seed in (105, 106)})
H100_CALLS.update({seed: ("fresh_s107/population_search_b64_s107.csv",) for seed in (107, 108)})
H100_CALLS[109] = ("fresh_s107/population_search_b64_s109.csv",)  # the whole seed ran in the second process
H100_CALLS[116] = ("pace_s116/population_search_b64_s116.csv",)
H100_CALLS.update({seed: ("engine_s121/population_search_b64_s121_122.csv",) for seed in (121, 122)})
H100_CALLS.update({seed: (f"engine_s121/population_search_b64_s{seed}.csv",) for seed in (123, 124)})
H100_CALLS.update({seed: ("idle_s125/population_search_b64_s126_127.csv",) for seed in (126, 127)})
H100_CALLS.update({seed: ("idle_s125/population_search_b64_s128_129.csv",) for seed in (128, 129)})
H100_CALLS[130] = ("idle_s125/population_search_b64_s130.csv",)
H100_CALLS.update({seed: ("settle_s131/population_search_b64_s131_132.csv",) for seed in (131, 132)})
H100_CALLS[133] = ("settle_s131/population_search_b64_s133.csv",)
H100_CALLS.update({f"{seed} at batch 256": ("settle_s131/population_search_b256_s131_132_133.csv",)
                   for seed in (131, 132, 133)})
H100_CALLS.update({seed: ("reference_s134/population_search_b64_s134_135.csv",) for seed in (134, 135)})
H100_CALLS[136] = ("reference_s134/population_search_b64_s136.csv",)
H100_CALLS.update({f"{seed} at batch 256": ("reference_s134/population_search_b256_s134_135.csv",) for seed in (134, 135)})
H100_CALLS["136 at batch 256"] = ("reference_s134/population_search_b256_s136.csv",)
H100_CALLS[137] = ("s137/population_search_b64_s137.csv",)  # its batch-256 runs were stopped by the call's limit
H100_CALLS.update({seed: (f"nsga2_s140/population_search_b64_s{seed}.csv",) for seed in (140, 141, 142)})
H100_CALLS.update({f"{seed} at batch 256": (f"nsga2_s140/population_search_b256_s{seed}.csv",) for seed in (140, 141, 142)})
H100_CALLS.update({seed: (f"lean_s143/population_search_b64_s{seed}.csv",) for seed in (143, 144, 145)})
H100_CALLS["143 at batch 256"] = ("lean_s143/population_search_b256_s143.csv",)
H100_CALLS.update({seed: (f"copies_s146/population_search_b64_s{seed}.csv",) for seed in (146, 147)})
H100_CALLS["146 at batch 256"] = ("copies_s146/population_search_b256_s146.csv",)
#: calls whose `pP-pareto-qa` runs cut at rungs in NSGA-II's order (`halving.select=nsga2`, the default while they
#: ran); their `-sf` runs let whole fronts go on, as the default does and every other call's runs did
NSGA2_CALLS = {140, 141, 142, "140 at batch 256", "141 at batch 256", "142 at batch 256"}
#: README's end-to-end table, row by row: the device, its calls (by seed) and the population sizes it reads
POPULATION_ROWS = (("h200", (80, 84), (16,)), ("h200", (80, 84), (64, 256)), ("h200", (96,), (16,)),
                   ("h200", (96,), (64, 256)), ("h200", (82,), (16, 64)), ("h200", (81, 83), (16, 64)),
                   ("h200", (85,), (16, 64)), ("h100", (99, 100, 101), (16,)), ("h100", (99, 100, 101), (64, 256)),
                   ("h100", ("99 at batch 256",), (16, 64)), ("h100", (105, 106, 107, 108, 109, 116), (16,)),
                   ("h100", (105, 106, 107, 108, 109), (64,)), ("h100", (121, 122, 123, 124), (16,)),
                   ("h100", (121, 122, 123, 124), (64,)), ("h100", (126, 127, 128, 129, 130), (16,)),
                   ("h100", (128, 129, 130), (64,)), ("h100", (131, 133), (16,)), ("h100", (131, 132, 133), (64, 256)),
                   ("h100", tuple(f"{s} at batch 256" for s in (131, 132, 133)), (16,)),
                   ("h100", tuple(f"{s} at batch 256" for s in (131, 132, 133)), (64, 256)),
                   ("h100", (134, 135, 136, 137), (16,)), ("h100", (134, 135, 136, 137), (64, 256)),
                   ("h100", tuple(f"{s} at batch 256" for s in (134, 135, 136)), (16,)),
                   ("h100", tuple(f"{s} at batch 256" for s in (134, 135, 136)), (64, 256)),
                   ("h100", (140, 141, 142), (16,), True), ("h100", (140, 141, 142), (16,)),
                   ("h100", (140, 141, 142), (64, 256)),
                   ("h100", tuple(f"{s} at batch 256" for s in (140, 141, 142)), (16,)),
                   ("h100", tuple(f"{s} at batch 256" for s in (140, 141, 142)), (64, 256)),
                   ("h100", (143, 144, 145), (16,)), ("h100", (143, 144, 145), (64, 256)),
                   ("h100", ("143 at batch 256",), (16,)), ("h100", ("143 at batch 256",), (64, 256)),
                   ("h100", (146, 147), (16,)), ("h100", (146, 147), (64, 256)),
                   ("h100", ("146 at batch 256",), (16,)), ("h100", ("146 at batch 256",), (64, 256)))
GOALS = ("5x", "3x", "40x", "fronts", "as fast as 16", "no failures")  # the goals set for populations


def population_runs(device: str, call: int | str, whole_fronts: bool = False) -> list[dict]:
    """A seed's population runs of the plain `pP-pareto` kind (repeats included, and `-qa`, which names the prune
    policy's default; variants such as `-a4` not; of a file that holds several seeds, that seed's rows), or with
    `whole_fronts` its `pP-pareto-sf-qa` runs (a call of NSGA2_CALLS: the rung rule that is the default now),
    each with its rate over one at a time in the same seed's calls (`x`), over the mean of the seed's 16-place
    runs (`of16`), over a plain eager loop and its front over one at a time's where that call measured them,
    and its settings from the call's JSON."""
    calls = []
    for name in (H200_CALLS if device == "h200" else H100_CALLS)[call]:
        path = POPULATION[device] / name
        summary = json.loads(path.with_suffix(".json").read_text())
        rows = list(csv.DictReader(path.read_text().splitlines()))
        rows = [r for r in rows if r["seed"] == str(call).split()[0]]  # the call's seed ("131 at batch 256": 131)
        # a run that ended fewer trials than its budget was stopped by its call's time limit (its unfinished trials
        # read as failed); it is left out, as is the call's 16-place mean that it would lower
        rows = [r for r in rows if int(r["finished"]) == summary["settings"]["trials"]]
        if any(drew_a_repeat(summary, r["seed"]) for r in rows):  # its ratio divides by a trial that trained nothing
            rows = [{**r, "speedup_over_plain_search": ""} for r in rows]
        calls.append((summary["settings"], rows))
    p1 = next(float(r["candidates_per_gpu_hour"]) for _, rows in calls for r in rows if r["run"] == "p1")
    kind = r"p(16|64|256)-pareto-sf-qa" if whole_fronts else r"p(16|64|256)-pareto(-qa)?(\.\d+)?"
    runs = [(settings, rows, r) for settings, rows in calls for r in rows if re.fullmatch(kind, r["run"])]
    sixteen = [float(r["candidates_per_gpu_hour"]) for _, _, r in runs if r["run"].startswith("p16-")]
    sixteen = statistics.fmean(sixteen) if sixteen else None  # None: the call's 16-place run was left out
    found = []
    for settings, rows, r in runs:
        rate, beside_p1 = float(r["candidates_per_gpu_hour"]), any(x["run"] == "p1" for x in rows)
        if beside_p1:  # the call's own ratio, where one at a time was its baseline
            assert abs(rate / p1 - float(r["speedup_over_baseline"])) < 1e-3, r
        found.append({"seed": r["seed"], "size": int(r["run"][1:].split("-")[0]), "x": rate / p1,
                      "of16": rate / sixteen if sixteen else None, "failed": int(r["failed"]),
                      "batch": settings["batch_size"],
                      "trials": settings["trials"], "settings": settings["settings"],
                      "plain": float(r["speedup_over_plain_search"]) if r["speedup_over_plain_search"] else None,
                      "front": float(r["hypervolume_ratio"]) if beside_p1 else None,
                      "p1_pruned": next((int(x["pruned_before_training"]) for x in rows if x["run"] == "p1"), None),
                      "pruned": int(r["pruned_before_training"]), "together": r["mean_together"],
                      "nsga2": call in NSGA2_CALLS and not whole_fronts})
    return found


def drew_a_repeat(summary: dict, seed: str) -> bool:
    """Whether the plain loop's sample of one at a time's cells (`--plain-sample`) drew a repeat of a cell already
    trained: its trial ends in milliseconds without training (in the committed runs every trial under 0.2 s took at
    most 0.17 s, every other at least 0.39 s), so the loop's seconds over it rate nothing. Samples drawn before
    population_search.py left repeats out."""
    sample = (summary.get("plain_sample") or {}).get(f"p1/s{seed}") or []
    return any(p["trial_seconds"] < 0.2 for p in sample)


def spread(values: list[float], fmt: str, suffix: str = "") -> str:
    low, high = format(min(values), fmt), format(max(values), fmt)
    return f"{low}{suffix}" if low == high else f"{low}-{high}{suffix}"


def population_row(device: str, calls: tuple, sizes: tuple[int, ...],
                   whole_fronts: bool = False) -> tuple[list[str], list[dict]]:
    """One row of README's end-to-end table: its cells from the calls' result files, and the runs it read."""
    runs = [r for call in calls for r in population_runs(device, call, whole_fronts) if r["size"] in sizes]
    nsga2 = {r["nsga2"] for r in runs}
    assert len(nsga2) == 1  # one rung rule a row
    assert {r["size"] for r in runs} == set(sizes)
    batch, trials = {r["batch"] for r in runs}, {r["trials"] for r in runs}
    settings = {tuple(r["settings"]) for r in runs}
    assert len(batch) == len(trials) == len(settings) == 1 and "anchors=4" in next(iter(settings))
    pruning = {"prune=dominated_throughput", "evaluator=auto"} <= set(next(iter(settings)))
    at_once = " and ".join(str(s) for s in sizes) + " at once"
    seeds = sorted({r["seed"] for r in runs}, key=int)
    named = ", ".join(seeds)
    for size in sizes:
        some = sorted({r["seed"] for r in runs if r["size"] == size}, key=int)
        if some != seeds:
            named += f" ({size} at once: {', '.join(some)})"
    x = [r["x"] for r in runs]
    larger = [r["of16"] for r in runs if r["size"] != 16 and r["of16"] is not None]
    over = spread(x, ".2f", "x")
    if larger:
        beside = sorted({r["seed"] for r in runs if r["size"] != 16 and r["of16"] is not None}, key=int)
        where = f"; {', '.join(beside)}" if len(beside) < len({r["seed"] for r in runs}) else ""
        over += f" ({f'{sizes[1]}: ' if sizes[0] == 16 else ''}{spread(larger, '.2f', 'x')} of 16{where})"
    plain = [r["plain"] for r in runs if r["plain"] is not None]
    plain_cell = spread(plain, ".1f", "x") if plain else ""
    if plain and len(plain) < len(runs):
        plain_cell += f" ({', '.join(sorted({r['seed'] for r in runs if r['plain'] is not None}, key=int))})"
    fronts = [r["front"] for r in runs if r["front"] is not None]
    front_cell = spread(fronts, ".3f") if fronts else ""
    if len(fronts) == 1 < len(runs):
        front_cell += " (one run)"
    assert len(fronts) in (0, 1, len(runs))

    # each goal: whether each of the row's runs met it (None where its figure was not measured); a goal that
    # does not apply to the row (5x at batch 256, 64 at once against 16 in a row of 16 alone) is left out
    judged = {"5x": [v >= 5 for v in x] if batch == {64} else [], "3x": [v >= 3 for v in x] if batch == {256} else [],
              "40x": [None if r["plain"] is None else r["plain"] >= 40 for r in runs] if batch == {64} else [],
              "fronts": [None if r["front"] is None else r["front"] >= 0.95 for r in runs],
              "as fast as 16": [v >= 1 for v in larger], "no failures": [r["failed"] == 0 for r in runs]}
    met = [goal for goal in GOALS if judged[goal] and all(v is True for v in judged[goal])]
    missed = [goal for goal in GOALS if False in judged[goal]]
    cells = [f"**{device.upper()}**" if device == "h100" else device.upper(), str(batch.pop()),
             f"{'`prune=dominated_throughput evaluator=auto`' if pruning else 'no pruning'}, "
             f"{'`halving.select=nsga2`, ' if nsga2.pop() else ''}{trials.pop()} trials, "
             f"{at_once}", named, over, plain_cell, front_cell, str(sum(r["failed"] for r in runs)),
             ", ".join(met) or "none", ", ".join(missed) or "none"]
    return cells, runs


def test_the_population_table_is_its_runs():
    """README's end-to-end bullet: the table rebuilt row by row from the result files of the seeds each row
    names, the goals each row meets from its figures, and the sentences around it from the same runs."""
    text = readme()
    rows = [population_row(*row) for row in POPULATION_ROWS]
    lines = ["| device | batch | settings | seeds | over one at a time (graphs) | over a plain eager loop | "
             "hypervolume / one at a time | failed trials | goals met | goals missed |",
             "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | --- | --- |"]
    for cells, _ in rows:
        line = " ".join(("| " + " | ".join(cells) + " |").split())
        assert line in text, line
        lines.append(line)
    assert " ".join(lines) in text  # in this order, and no other row between them
    assert text.count("| device | batch | settings | seeds |") == 1

    first = rows[0][0]
    assert len(first[3].split(", ")) == 2  # "two seeds only"
    assert (f"16 candidates at once ended {first[4]} as many candidates per GPU-hour as the project's default, one "
            f"candidate at a time with each step a CUDA graph (`p1`), and {first[5]} as many as a plain eager PyTorch "
            f"loop training one candidate at a time, with fronts {first[6]} of one at a time's hypervolume and no "
            f"failed trial (seeds {' and '.join(first[3].split(', '))}, two seeds only") in text
    assert first[7] == "0"
    sample = [json.loads((POPULATION["h200"] / H200_CALLS[seed][0]).with_suffix(".json").read_text())["settings"]
              ["plain_sample"] for seed in (80, 84)]
    assert f"the plain loop (`benchmarks/plain_eager.py`) on {min(sample)}-{max(sample)} of `p1`'s cells" in text
    seed96 = [r for cells, runs in rows if cells[3] == "96" for r in runs]
    assert sum(r["front"] is not None for r in seed96) == 1  # "the only run of that seed scored against it"
    together = [float(r["together"]) for call in (80, 82, 84) for r in population_runs("h200", call)]
    assert (f"on seeds 80, 82 and 84 populations of 16 to 256 places trained {min(together):.1f}-{max(together):.1f} "
            "candidates at once on average") in text
    pruned = [(cells, runs) for cells, runs in rows if cells[2].startswith("`prune=")
              and all(int(r["seed"]) < 102 for r in runs)]  # the runs before pruning judged at the first rung
    alone = [r["p1_pruned"] for _, runs in pruned for r in runs]
    assert all(r["pruned"] == 0 for _, runs in pruned for r in runs) and None not in alone
    assert all(", 48 trials, " in cells[2] for cells, _ in pruned)
    assert f"one at a time pruned {min(alone)}-{max(alone)} of its 48 trials before training and no population" in text


def test_the_command_costs_are_the_measured_ones():
    """A command run several times shows the median wall time with its range, and the median seconds a trial."""
    with (ROOT / "benchmarks" / "results" / "cpu" / "command_cost" / "command_cost.csv").open(newline="") as f:
        measured = list(csv.DictReader(f))
    text = readme()
    assert measured and all(r["exit_code"] == "0" for r in measured)
    for command in dict.fromkeys(r["command"] for r in measured):
        runs = [r for r in measured if r["command"] == command]
        walls = [float(r["wall_s"]) for r in runs]
        trials = sorted({int(r["trials"]) for r in runs})
        wall = f"{statistics.median(walls):.0f} s" + (f" ({min(walls):.0f}-{max(walls):.0f})" if len(runs) > 1 else "")
        counted = str(trials[0]) if len(trials) == 1 else f"{trials[0]}-{trials[-1]}"
        per_trial = statistics.median(float(r["s_per_trial"]) for r in runs)
        assert f"| `{command}` | {wall} | {counted} | {per_trial:.2f} |" in text, command
    default = [r for r in measured if r["command"] == "nasutil-search"]  # the quick start's figure is this one
    cores = {r["cpus"] for r in default}
    assert len(cores) == 1 and (f"about {statistics.median(float(r['wall_s']) for r in default):.0f} s on an idle "
                                f"{cores.pop()}-core CPU machine") in text
    earlier = ROOT / "benchmarks" / "results" / "cpu" / "command_cost" / "command_cost_2026-12-03.csv"
    before = {r["command"]: float(r["wall_s"]) for r in csv.DictReader(earlier.open(newline=""))}
    ratios = [before[c] / statistics.median(float(r["wall_s"]) for r in measured if r["command"] == c)
              for c in dict.fromkeys(r["command"] for r in measured)]
    flat, benchmarks = " ".join(text.split()), " ".join((ROOT / "BENCHMARKS.md").read_text().split())
    assert f"took {min(ratios):.2f}-{max(ratios):.2f}x these medians" in flat
    assert f"read {min(ratios):.2f}-{max(ratios):.2f}x slower" in benchmarks
    population = [float(r["wall_s"]) for r in measured if "population=8" in r["command"]]
    assert f"took {min(population):.0f}-{max(population):.0f} s over {len(population)} runs".replace(
        " 6 runs", " six runs") in benchmarks



def test_the_other_command_costs_are_the_measured_ones():
    with (ROOT / "benchmarks" / "results" / "cpu" / "command_cost" / "command_cost_docs.csv").open(newline="") as f:
        measured = list(csv.DictReader(f))
    text = readme()
    assert measured
    for r in measured:
        outcome = r["error"] or "finished"
        assert (f"| `{r['command']}` | {float(r['wall_s']):,.0f} s | {r['trials'] or '-'} | {outcome} |"
                in text), r["command"]
        assert (r["exit_code"] == "0") == (not r["error"]), r["command"]
    loads = [float(r["load_avg"]) for r in measured]
    assert f"(load averages {min(loads):.2f}-{max(loads):.2f} on the 2 cores" in " ".join(text.split())


def test_the_h200_command_costs_are_the_measured_ones():
    folder = ROOT / "benchmarks" / "results" / "h200" / "command_cost"
    with (folder / "command_cost_docs.csv").open(newline="") as f:
        measured = list(csv.DictReader(f))
    text = readme()
    assert measured and all(r["gpu"] == "NVIDIA H200" for r in measured)
    for r in measured:  # the row's last cell, after its CPU outcome; a command stopped at its limit says so
        assert r["exit_code"] in ("0", "130"), r["command"]
        cell = (f"{float(r['wall_s']):,.0f} s" if r["exit_code"] == "0"
                else f"stopped at {float(r['wall_s']):,.0f} s, {r['trials']} trials")
        assert re.search(rf"\| `{re.escape(r['command'])}` \|[^|]*\|[^|]*\|[^|]*\| {re.escape(cell)} \|", text), r["command"]
    population = ROOT / "benchmarks" / "results" / "h200" / "population"
    walls = [float(r["wall_s"]) for seed in (61, 62, 64)
             for r in csv.DictReader((population / f"population_search_b64_s{seed}.csv").open())
             if r["run"] == "p16-pareto"]
    walls += [float(r["wall_s"]) for turns in (4, 8)
              for r in csv.DictReader((population / "host_turns_s65" / f"turns{turns}.csv").open())
              if r["run"] == "p16-pareto"]
    pruned = json.loads((population / "population_search_b64_defaults_s63_runs.jsonl").read_text())
    assert (f"took {min(walls):.0f}-{max(walls):.0f} s on seeds 61-65, and {pruned['wall_s']:.0f} s with pruning "
            "before training and measured survivors (seed 63;") in text


def test_the_h100_command_costs_are_the_measured_ones():
    """The H100 column: the commands not timed on the H200, each cell its run's wall time, or where the run
    was stopped at its limit, that and the trials it had finished (where the command counts trials)."""
    folder = ROOT / "benchmarks" / "results" / "h100" / "command_cost"
    with (folder / "command_cost_docs.csv").open(newline="") as f:
        measured = list(csv.DictReader(f))
    with (ROOT / "benchmarks" / "results" / "h200" / "command_cost" / "command_cost_docs.csv").open(newline="") as f:
        on_h200 = {r["command"] for r in csv.DictReader(f)}
    text = readme()
    assert measured and all(r["gpu"] == "NVIDIA H100 80GB HBM3" for r in measured)
    assert not on_h200 & {r["command"] for r in measured}
    for r in measured:
        assert r["exit_code"] in ("0", "130"), r["command"]
        wall = f"{float(r['wall_s']):,.0f} s"
        cell = wall if r["exit_code"] == "0" else f"stopped at {wall}" + (f", {r['trials']} trials" if r["trials"] else "")
        assert re.search(rf"\| `{re.escape(r['command'])}` \|[^|]*\|[^|]*\|[^|]*\| \| {re.escape(cell)} \|", text), r["command"]
    loads = [float(r["load_avg"]) for r in measured]
    assert f"load averages {min(loads):.2f}-{max(loads):.1f} when the commands started" in " ".join(text.split())


def test_the_held_out_prediction_line_quotes_architectures_no_fit_saw():
    """nb201 from the full pass's unfitted cells, darts and nb101 from a fresh seed with fitted archs left
    out, mbconv from the benchmark's own split (the shipped profile saw every measured mbconv network)."""
    study = json.loads((ROOT / "experiments" / "nb201_study" / "results" / "summary.json").read_text())
    nb201 = study["batches"]["256"]["prediction_error"]
    heldout = json.loads((ROOT / "benchmarks" / "results" / "h200" / "predictor_heldout.json").read_text())
    fresh = {r["space"]: r["operators"] for r in heldout["results"]
             if r["batch_size"] == 256 and r["mode"] == "cudagraph"}
    accuracy = json.loads((ROOT / "benchmarks" / "results" / "h200" / "predictor_accuracy.json").read_text())
    mbconv = next(s for s in accuracy["summaries"]
                  if s["space"] == "mbconv" and s["batch_size"] == 256 and s["mode"] == "cudagraph")
    flat = " ".join(readme().split())
    assert (f"{100 * nb201['within_10pct']:.1f}% of nb201 cells (the {nb201['cells']:,} cells of the full pass "
            f"outside its fit; Kendall tau {nb201['kendall_tau']:.3f}), {100 * fresh['darts']['within_10pct']:.1f}% "
            f"of darts networks and {100 * fresh['nb101']['within_10pct']:.1f}% of nb101 cells (a fresh seed, cells "
            f"the fit saw left out; tau {fresh['darts']['kendall_tau']:.3f} and {fresh['nb101']['kendall_tau']:.3f})"
            ) in flat
    operators = mbconv["results"]["operators"]
    assert (f"fitted on {mbconv['train']} networks, put the other {mbconv['test']} within +-10% for "
            f"{100 * operators['within_10pct']:.1f}% of them (tau {operators['kendall_tau']:.3f};") in flat


PLANTED = [  # (check, a pattern whose one group is a figure README.md quotes from a result file)
    (test_the_survey_line_quotes_its_data, r"SM activity has a median of ([0-9.]+)%"),
    (test_the_nb201_study_line_quotes_its_data, r"all ([0-9,]+) NAS-Bench-201 cells measured"),
    (test_the_pruning_line_quotes_the_measured_scoring, r"NSGA-II and TPE save only ([0-9]+)-"),
    (test_the_packing_figures_are_the_colocation_experiments, r"once ([0-9.]+x) faster than random groups"),
    (test_the_population_table_is_its_runs, r"\| 80, 84 \| ([0-9.]+)-[0-9.]+x \|"),
    (test_the_population_table_is_its_runs, r"\| 85 \| [0-9.x-]+ \(64: ([0-9.]+)x of 16\)"),
    (test_the_command_costs_are_the_measured_ones, r"\| `nasutil-search` \| ([0-9]+) s \("),
    (test_the_command_costs_are_the_measured_ones, r"about ([0-9]+) s on an idle [0-9]+-core CPU machine"),
    (test_the_other_command_costs_are_the_measured_ones, r"\| `nasutil-codes k=4 [^|]*` \| ([0-9]+) s \|"),
    (test_the_h200_command_costs_are_the_measured_ones, r"halving=pareto` \| 903 s \| 0 \| [^|]* \| ([0-9]+) s \|"),
]


def stale(text: str, pattern: str) -> str:
    """`text` with the figure `pattern` finds changed by one in its first digit: a number that drifted."""
    match = re.search(pattern, text)
    assert match, pattern
    figure = match.group(1)
    digit = next(i for i, ch in enumerate(figure) if ch.isdigit() and ch != "0")
    changed = figure[:digit] + str(int(figure[digit]) % 9 + 1) + figure[digit + 1:]
    return text[:match.start(1)] + changed + text[match.end(1):]


@pytest.mark.parametrize("check, pattern", PLANTED, ids=[c.__name__ for c, _ in PLANTED])
def test_a_planted_stale_figure_fails_its_check(monkeypatch, check, pattern):
    text = readme()
    check()  # the README as it is passes
    planted = stale(text, pattern)  # outside the raises below: a pattern that finds nothing fails here
    monkeypatch.setitem(globals(), "readme", lambda: planted)
    with pytest.raises(AssertionError):
        check()


def test_readmes_first_rung_pruning_figures_are_seed_102s_runs():
    """What README says of pruning at the first rung on a GPU: seed 102's runs on an H100, auto against final."""
    path = POPULATION["h100"] / "rung_s102" / "population_search_b64_rung_s102.csv"
    runs = {r["run"]: r for r in csv.DictReader(path.open())}
    auto, final = runs["p16-pareto-qa"], runs["p16-pareto-qf"]
    flat = " ".join(readme().split())
    assert final["pruned_before_training"] == "0"
    assert (f"(seed 102), 16 at once pruned {auto['pruned_before_training']} of its 48 candidates before training where "
            f"final accuracies pruned none, and ended "
            f"{float(auto['candidates_per_gpu_hour']) / float(final['candidates_per_gpu_hour']):.2f}x as many candidates "
            f"per GPU-hour with a front of {float(auto['hypervolume_ratio']):.3f} of one at a time's against "
            f"{float(final['hypervolume_ratio']):.3f}") in flat
    assert float(auto["speedup_over_baseline"]) < 5
    assert (f"on seed 102 on an H100, 16 at once pruned {auto['pruned_before_training']} before training and ran "
            f"{float(auto['speedup_over_baseline']):.2f}x one at a time, and on an H200") in flat


def test_readmes_h200_first_rung_figures_are_seeds_103_and_104s_runs():
    """16 at once on seeds 103 and 104 (first process) over one at a time (second process), fronts with both
    processes' runs of a seed scaled together, as BENCHMARKS.md's table has them."""
    first = sorted((r for r in seeds_103_and_104() if r["process"] == "first"), key=lambda r: r["seed"])
    over, fronts = [r["x"] for r in first], [r["front"] for r in first]
    assert [r["seed"] for r in first] == [103, 104] and max(over) < 5
    assert (f"on an H200 (seeds 103 and 104, one at a time timed in the next process on the same machine) "
            f"{over[0]:.2f}x and {over[1]:.2f}x with fronts {fronts[0]:.3f} and {fronts[1]:.3f}: still short of 5x"
            ) in " ".join(readme().split())


def test_readmes_seeds_105_and_106_figures_are_their_runs():
    from test_benchmark_population import seeds_105_and_106

    p16 = sorted((r for r in seeds_105_and_106() if r["run"] == "p16-pareto-qa"), key=lambda r: r["seed"])
    x = [float(r["row"]["speedup_over_baseline"]) for r in p16]
    plain = [float(r["row"]["speedup_over_plain_search"]) for r in p16]
    front = [float(r["row"]["hypervolume_ratio"]) for r in p16]
    assert (f"seeds 105 and 106 on an H100 ran {x[0]:.2f}x and {x[1]:.2f}x one at a time in the same process, "
            f"{plain[0]:.2f}x and {plain[1]:.2f}x the plain eager loop, fronts {front[0]:.3f} and {front[1]:.3f}"
            ) in " ".join(readme().split())


def test_readmes_seeds_107_to_109_figures_are_their_runs():
    from test_benchmark_population import seeds_107_to_109

    paired = {(r["run"], r["seed"]): r["row"] for r in seeds_107_to_109() if r["row"]["speedup_over_baseline"]}
    said = []
    for run in ("p16-pareto-qa", "p64-pareto-qa"):
        x = [float(paired[(run, s)]["speedup_over_baseline"]) for s in (107, 108, 109)]
        said.append(f"{x[0]:.2f}x, {x[1]:.2f}x and {x[2]:.2f}x")
    fronts = [float(row["hypervolume_ratio"]) for (run, _), row in paired.items() if run != "p1"]
    assert all(int(row["failed"]) == 0 for row in paired.values())
    assert (f"On three fresh seeds on an H100 (107-109), 16 at once ran {said[0]} one at a time and 64 at once "
            f"{said[1]}, with fronts of {min(fronts):.3f}-{max(fronts):.3f}, none failed") in " ".join(readme().split())


def test_readmes_warmed_worker_figures_are_the_seed_110_passes():
    rate = json.loads((ROOT / "benchmarks" / "results" / "h100" / "rate" / "fresh_s110" / "nb201_rate.json").read_text())
    by = {p["pass"]: p for p in rate["passes"]}
    warm, cold = by["fast"], by["fast, cold workers"]
    prep = [p["mean_phase_ms"]["to_device_s"] + p["mean_phase_ms"]["prepare_s"] for p in (warm, cold)]
    apart = rate["agreement"]["fast, cold workers vs fast"]["median"]
    assert (f"cut the preparation of a cell in a short pass from {prep[1]:.0f} to {prep[0]:.0f} ms and raised it from "
            f"{cold['cells_per_s']:.2f} to {warm['cells_per_s']:.2f} cells a second, and left the readings as they were "
            f"(warmed and cold workers {apart:.2%} apart at the median over {warm['cells']} cells") in " ".join(readme().split())


FAST_RUN = ROOT / "benchmarks" / "results" / "h100" / "rate" / "first_copied_s143"
FAST_PASS = "fast, weights=device"  # the fast settings as they are (`MeasureConfig.fast`); the pass "fast" copied


def whole_space_pass(folder: Path) -> dict:
    """The one run of a folder's full pass (experiments/nb201_study/measure.py stages=[all])."""
    runs = json.loads((folder / "all_b256_runs.json").read_text())
    assert len(runs) == 1 and runs[0]["cells"] == 15_625 and runs[0]["failed"] == 0
    return runs[0]


def test_readmes_fast_figures_are_the_seed_143_pass():
    """The fast settings against the default settings on 200 fresh cells, the plain loop reading both alike, and
    the whole space with them and with the weights copied (seed 142's call, the same machine) on an H100."""
    rate = json.loads((FAST_RUN / "nb201_rate.json").read_text())
    pair, got = rate["agreement"][f"default vs {FAST_PASS}"], rate["agreement"]
    assert rate["machine"]["device"] == "NVIDIA H100 80GB HBM3"
    assert {p["workers"] for p in rate["passes"]} == {8}
    assert abs(got[f"reference vs {FAST_PASS}"]["median_ratio"] - got["reference vs default"]["median_ratio"]) < 0.005
    made, copied = whole_space_pass(FAST_RUN), whole_space_pass(FAST_RUN.parent / "in_turn_s142")
    assert made["config"]["weights"] == "device" and copied["config"]["weights"] == "host"
    text = " ".join(readme().split())
    assert (f"On an H100 with 8 workers it read {pair['cells']} fresh cells within {pair['max']:.2%} of the default "
            f"settings ({pair['median']:.2%} at the median)") in text
    assert (f"It measured all 15,625 NAS-Bench-201 cells in {made['seconds'] / 60:.1f} minutes "
            f"({made['cells_per_s']:.2f} cells a second) against {copied['seconds'] / 60:.1f} with the weights "
            f"copied, the two tables within {whole_space_difference():.2%} of each other cell by cell") in text


def whole_space_difference() -> float:
    """The largest difference, cell by cell, between the whole-space tables with the weights made on the device
    (seed 143's call) and copied (seed 142's)."""
    made, copied = (whole_space_table(FAST_RUN.parent / name) for name in ("first_copied_s143", "in_turn_s142"))
    assert made.keys() == copied.keys() and len(made) == 15_625
    return max(abs(made[arch] / copied[arch] - 1) for arch in made)


def whole_space_table(folder: Path) -> dict[str, float]:
    with gzip.open(folder / "measured_all_b256.csv.gz", "rt", newline="") as fh:
        return {r["arch"]: float(r["latency_ms"]) for r in csv.DictReader(fh) if r["status"] == "ok"}


def test_the_fast_flags_help_gives_the_seed_143_pass():
    """`nasutil measure --help` quotes the fast settings' agreement with the defaults from the same run as README."""
    rate = json.loads((FAST_RUN / "nb201_rate.json").read_text())
    pair = rate["agreement"][f"default vs {FAST_PASS}"]
    made = whole_space_pass(FAST_RUN)
    shown = subprocess.run([sys.executable, "-m", "nasutil", "measure", "--help"], capture_output=True, text=True,
                           timeout=120, cwd=ROOT, env={**os.environ, "COLUMNS": "1000"})  # no break in NAS-Bench-201
    assert shown.returncode == 0, shown.stderr
    assert (f"within {pair['max']:.2%} of the defaults on {pair['cells']} fresh cells on an H100 with 8 workers, "
            f"{pair['median']:.2%} at the median; all 15,625 NAS-Bench-201 cells in {made['seconds'] / 60:.1f} min "
            f"there") in " ".join(shown.stdout.split())


def test_readmes_mps_figures_are_the_seed_112_passes():
    """Every pass under MPS against the plain loop timed without MPS on the same machine."""
    folder = ROOT / "benchmarks" / "results" / "h100" / "rate" / "mps_same_s112"
    without = json.loads((folder / "reference_without_mps.json").read_text())
    with (folder / "nb201_rate.csv").open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["status"] == "ok"]
    passes = dict.fromkeys(r["pass"] for r in rows)
    medians = []
    for name in passes:
        ms = {r["arch"]: float(r["latency_ms"]) for r in rows if r["pass"] == name}
        medians.append(statistics.median(ms[a] / m for a, m in without.items()))
    assert len(passes) == 6
    assert (f"every pass under MPS read the same {len(without)} cells {min(medians):.3f}-{max(medians):.3f}x a plain "
            f"loop timed without MPS") in " ".join(readme().split())


def test_readmes_seed_116_figures_are_its_run():
    folder = ROOT / "benchmarks" / "results" / "h100" / "population" / "pace_s116"
    row = next(r for r in csv.DictReader((folder / "population_search_b64_s116.csv").read_text().splitlines())
               if r["run"] == "p16-pareto-qa")
    assert (f"Seed 116, with the host's own speed timed beside each run, ran {float(row['speedup_over_baseline']):.2f}x "
            f"with a front of {float(row['hypervolume_ratio']):.3f}") in " ".join(readme().split())


def test_the_engine_floor_sentence_is_the_seed_121_to_124_runs():
    """README's sentence on the engine floor: the bound and the shares of the default runs, from the files."""
    runs = [r for seed in (121, 122, 123, 124) for name in H100_CALLS[seed]
            for r in csv.DictReader((POPULATION["h100"] / name).read_text().splitlines()) if r["seed"] == str(seed)]
    runs = list({(r["run"], r["seed"]): r for r in runs}.values())  # seeds 121 and 122 share a file
    sixteen = [r for r in runs if r["run"] == "p16-pareto-qa"]
    alone = [r for r in runs if r["run"] == "p1"]
    assert len(sixteen) == len(alone) == 4

    def span(rows: list[dict], key: str, scale: float, fmt: str) -> str:
        values = [scale * float(r[key]) for r in rows]
        return f"{format(min(values), fmt)}-{format(max(values), fmt)}"

    text = " ".join(readme().split())
    assert (f"the engine could give 16 at once {span(sixteen, 'engine_bound_over_baseline', 1, '.2f')}x one at a time"
            in text)
    assert (f"leaves 16 at once {span(sixteen, 'engine_share', 100, '.0f')}% of its span in the engine, against "
            f"{span(alone, 'engine_share', 100, '.0f')}% for one at a time") in text
    repeats = [seed for seed in (107, 109, 122) for name in H100_CALLS[seed]
               if drew_a_repeat(json.loads((POPULATION["h100"] / name).with_suffix(".json").read_text()), str(seed))]
    assert repeats == [107, 109, 122] and "on seeds 107, 109 and 122 drew a repeat" in text


def test_the_measured_at_once_sentence_is_the_seed_126_to_130_runs():
    """README's sentence on seeds 126-130: rates, shares, fronts on both scorings and the survivors' readings, from
    the files."""
    runs = [r for seed in (126, 127, 128, 129, 130) for name in H100_CALLS[seed]
            for r in csv.DictReader((POPULATION["h100"] / name).read_text().splitlines()) if r["seed"] == str(seed)]
    runs = list({(r["run"], r["seed"]): r for r in runs}.values())  # two seeds share a file
    sixteen = [r for r in runs if r["run"] == "p16-pareto-qa"]
    sixty_four = [r for r in runs if r["run"] == "p64-pareto-qa"]
    assert len(sixteen) == 5 and len(sixty_four) == 3

    def span(rows: list[dict], key: str, fmt: str, scale: float = 1) -> str:
        values = [scale * float(r[key]) for r in rows]
        return f"{format(min(values), fmt)}-{format(max(values), fmt)}"

    rate = {(r["run"], r["seed"]): float(r["candidates_per_gpu_hour"]) for r in runs}
    of16 = [rate[("p64-pareto-qa", r["seed"])] / rate[("p16-pareto-qa", r["seed"])] for r in sixty_four]
    met = sum(float(r["speedup_over_baseline"]) >= 5 for r in sixteen)
    text = " ".join(readme().split())
    assert (f"16 at once ran {span(sixteen, 'speedup_over_baseline', '.2f')}x one at a time (5x on "
            f"{['no', 'one', 'two', 'three', 'four', 'all'][met]} of five seeds) with "
            f"{span(sixteen, 'engine_share', '.0f', 100)}% of its span in the engine, and 64 at once ran "
            f"{span(sixty_four, 'speedup_over_baseline', '.2f')}x ({min(of16):.2f}-{max(of16):.2f}x of 16)") in text
    both = sixteen + sixty_four
    assert (f"Their fronts read {span(both, 'hypervolume_ratio', '.3f')} of one at a time's on each run's own survivor "
            f"readings") in text
    assert f"they read {span(both, 'hypervolume_ratio_one_reading', '.3f')}: survivors" in text
    low = min(float(r["survivor_ratio_min"]) for r in both)
    high = max(float(r["survivor_ratio_max"]) for r in both)
    assert f"read {low:.3f}-{high:.3f}x one at a time's readings of the same cells" in text


def test_the_settled_readings_sentence_is_the_seed_131_to_133_runs():
    """README's sentence on seeds 131-133: fronts, rates and failures from the files (the 16-place run its call's
    time limit stopped left out)."""
    runs = []
    for name in ("population_search_b64_s131_132.csv", "population_search_b64_s133.csv",
                 "population_search_b256_s131_132_133.csv"):
        batch = 256 if "b256" in name else 64
        runs += [{**r, "batch": batch} for r in csv.DictReader((POPULATION["h100"] / "settle_s131" / name).open())
                 if r["run"] != "p1" and r["finished"] == "48"]
    assert len(runs) == 17

    def span(values: list[float], fmt: str) -> str:
        return f"{format(min(values), fmt)}-{format(max(values), fmt)}"

    text = " ".join(readme().split())
    fronts = [float(r["hypervolume_ratio"]) for r in runs]
    assert f"every front read {span(fronts, '.3f')} of one at a time's on its own readings" in text
    assert min(fronts) >= 0.95
    x = {b: [float(r["speedup_over_baseline"]) for r in runs if r["batch"] == b] for b in (64, 256)}
    assert (f"the populations ran {span(x[64], '.2f')}x one at a time at batch 64 and {span(x[256], '.2f')}x at batch "
            f"256, where three runs lost a trial each") in text
    assert sum(int(r["failed"]) for r in runs if r["batch"] == 256) == 3
    assert sum(int(r["failed"]) for r in runs if r["batch"] == 64) == 0


def test_the_plain_loop_sentence_is_the_seed_134_to_136_runs():
    """README's sentence on seeds 134-136: failures, shortfalls, rates and fronts from the files, and the survivors'
    agreement with the plain loop from survivor_reference.py's rows, each reading once."""
    from test_benchmark_population import plain_loop_readings, seeds_134_to_136

    runs = seeds_134_to_136()
    populations = [r for r in runs if r["run"] != "p1"]
    text = " ".join(readme().split())
    shortfalls = sum((r.get("population_activity") or {}).get("memory_shortfalls") or 0 for r in populations)
    assert sum(r["failed"] for r in runs) == 0 and len(runs) == 24 and shortfalls == 2
    assert (f"On seeds 134-136 on an H100 no trial failed in {len(runs)} runs ({['no', 'one', 'two', 'three'][shortfalls]}"
            " members that ran out of "
            "memory while preparing were prepared again)") in text
    x = {b: [float(r["row"]["speedup_over_baseline"]) for r in populations if r["batch_size"] == b] for b in (64, 256)}
    assert (f"the populations ran {min(x[64]):.2f}-{max(x[64]):.2f}x one at a time at batch 64 and "
            f"{min(x[256]):.2f}-{max(x[256]):.2f}x at batch 256") in text
    fronts = [(float(r["row"]["hypervolume_ratio"]), r["seed"], r["batch_size"]) for r in populations]
    low = [v for v, seed, batch in fronts if (seed, batch) == (134, 256)]
    rest = [v for v, seed, batch in fronts if (seed, batch) != (134, 256)]
    assert max(low) < 0.95 <= min(rest)
    assert (f"every front read at least {min(rest):.3f} but those of seed 134 at batch 256 ({min(low):.3f}-"
            f"{max(low):.3f})") in text
    rows = plain_loop_readings()
    assert (f"{sum(abs(r['ratio'] - 1) <= 0.01 for r in rows)} of {len(rows)} agreed within 1%") in text
