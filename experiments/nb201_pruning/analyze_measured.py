"""Prune by prediction, score by measurement: the pruning experiment judged on measured H200 throughput.

Reads the trials of every search (`OUT/trials.csv.gz`; with `--runs`, first consolidated from a sweep's
run folders `RUNS/<sampler>-<prune>/s<seed>/trials.csv`, as `run_measured.sh` does), pairs each pruned
search with the unpruned one of the same sampler and seed, and scores both at each budget (the first N
trials of a search: a search asks one trial at a time, so its first 150 trials are the 150-trial search)
twice: on the shipped measured H200 table (`nasutil/data`, the truth) and on the predicted throughput
the policy saw (`results/predicted_h200.csv`). Hypervolume of the trained trials' (200-epoch CIFAR-10
accuracy, throughput) front, reference point (10% accuracy, the worst throughput over all 15,625 cells,
under each scoring). It also counts the pruned candidates that no trained candidate of their search
dominates on measured throughput: trained, they would have joined its front, and where each search's front
begins (its fastest trained cell, measured). Writes `measured.csv` (one row a pair and budget) and
`measured_summary.json` (per sampler and budget) into OUT.

    python experiments/nb201_pruning/analyze_measured.py --out experiments/nb201_pruning/results/measured
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import statistics
import sys
from pathlib import Path

from nasutil.data.measured import measured_table
from nasutil.data.nasbench201 import accuracy_table
from nasutil.errors import fail
from nasutil.pareto import front_2d, hypervolume_2d

HERE = Path(__file__).resolve().parent


def throughputs() -> dict[str, dict[str, float]]:
    """Scoring name -> arch -> throughput (images/s): measured (the shipped table) and predicted."""
    with (HERE / "results" / "predicted_h200.csv").open(newline="") as f:
        predicted = {r["arch"]: float(r["throughput_per_s"]) for r in csv.DictReader(f)}
    measured = {arch: figures["throughput_per_s"] for arch, figures in measured_table("nb201_h200").rows.items()}
    return {"measured": measured, "predicted": predicted}


KEPT = ("arm", "seed", "number", "outcome", "arch")  # what the analysis reads of each trial


def consolidate(runs: Path, out: Path, columns: tuple[str, ...] = KEPT) -> None:
    """Every trial of the sweep's run folders, one gzip CSV (the same trials give the same bytes); `columns`
    starts with arm and seed, the rest are read from each trial."""
    rows = []
    for path in sorted(runs.glob("*/s*/trials.csv")):
        arm, seed = path.parent.parent.name, int(path.parent.name[1:])
        with path.open(newline="") as f:
            rows += [{"arm": arm, "seed": seed, **{k: r[k] for k in columns[2:]}} for r in csv.DictReader(f)]
    rows.sort(key=lambda r: (r["arm"], r["seed"], int(r["number"])))
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(text.getvalue().encode(), 9, mtime=0))


def read_trials(path: Path) -> dict[tuple[str, int], list[dict]]:
    """(arm, seed) -> its trials in order, from a consolidated file."""
    out: dict[tuple[str, int], list[dict]] = {}
    with gzip.open(path, "rt", newline="") as f:
        for r in csv.DictReader(f):
            out.setdefault((r["arm"], int(r["seed"])), []).append(r)
    return {key: sorted(trials, key=lambda r: int(r["number"])) for key, trials in out.items()}


def hypervolume(trials: list[dict], budget: int, speed: dict[str, float], accuracy: dict[str, float],
                reference: tuple[float, float]) -> float:
    points = [(speed[t["arch"]], accuracy[t["arch"]]) for t in trials
              if int(t["number"]) < budget and t["outcome"] == "trained"]
    return hypervolume_2d(front_2d(points, x=lambda p: p[0], y=lambda p: p[1]), reference)


def fastest(trials: list[dict], budget: int, speed: dict[str, float], accuracy: dict[str, float]) -> float:
    """The measured throughput of the fastest trained cell above the reference's 10% accuracy: where the
    search's front begins, and what its hypervolume depends on most."""
    return round(max((speed[t["arch"]] for t in trials if int(t["number"]) < budget and t["outcome"] == "trained"
                      and accuracy[t["arch"]] > 10.0), default=0.0), 1)


def wrongly_pruned(trials: list[dict], budget: int, speed: dict[str, float], accuracy: dict[str, float]) -> int:
    """Candidates pruned before training that no trained candidate of the search dominates: trained, they
    would have joined its front."""
    trained = [(speed[t["arch"]], accuracy[t["arch"]]) for t in trials
               if int(t["number"]) < budget and t["outcome"] == "trained"]
    pruned = [t["arch"] for t in trials if int(t["number"]) < budget and t["outcome"] == "pruned_before_training"]
    return sum(not any(x >= speed[a] and y >= accuracy[a] for x, y in trained) for a in pruned)


def analyze(searches: dict[tuple[str, int], list[dict]], budgets: list[int],
            pruned_arm: str) -> tuple[list[dict], dict]:
    table = accuracy_table()
    accuracy = {arch: row["cifar10_test_200ep"] for arch, row in table.items()}
    scorings = throughputs()
    references = {name: (min(speed.values()), 10.0) for name, speed in scorings.items()}  # (throughput, accuracy)
    rows = []
    for (arm, seed), pruned in sorted(searches.items()):
        sampler, _, prune = arm.partition("-")
        baseline = searches.get((f"{sampler}-none", seed))
        if prune != pruned_arm or baseline is None:
            continue
        for budget in budgets:
            if len(pruned) < budget or len(baseline) < budget:
                continue
            trained = {arm: sum(int(t["number"]) < budget and t["outcome"] == "trained" for t in trials)
                       for arm, trials in (("pruned", pruned), ("baseline", baseline))}
            row = {"sampler": sampler, "seed": seed, "budget": budget, "trainings_pruned": trained["pruned"],
                   "trainings_baseline": trained["baseline"],
                   "trainings_saved": round(1 - trained["pruned"] / max(1, trained["baseline"]), 4)}
            for name, speed in scorings.items():
                hv = [hypervolume(trials, budget, speed, accuracy, references[name]) for trials in (pruned, baseline)]
                row[f"hv_ratio_{name}"] = round(hv[0] / hv[1], 5) if hv[1] > 0 else None
            for name, trials in (("pruned", pruned), ("baseline", baseline)):
                row[f"fastest_{name}_measured"] = fastest(trials, budget, scorings["measured"], accuracy)
            row["pruned"] = sum(int(t["number"]) < budget and t["outcome"] == "pruned_before_training" for t in pruned)
            row["pruned_on_front_measured"] = wrongly_pruned(pruned, budget, scorings["measured"], accuracy)
            rows.append(row)
    summary: dict = {"pruned_arm": pruned_arm, "reference": references, "by_sampler": {}}
    for sampler in sorted({r["sampler"] for r in rows}):
        for budget in budgets:
            group = [r for r in rows if r["sampler"] == sampler and r["budget"] == budget]
            if not group:
                continue
            entry = {"seeds": len(group),
                     "trainings_saved_mean": round(statistics.mean(r["trainings_saved"] for r in group), 4),
                     "trainings_saved_min": round(min(r["trainings_saved"] for r in group), 4),
                     "pruned": sum(r["pruned"] for r in group),
                     "pruned_on_front_measured": sum(r["pruned_on_front_measured"] for r in group)}
            for name in scorings:
                ratios = [r[f"hv_ratio_{name}"] for r in group]
                entry[f"hv_ratio_{name}_mean"] = round(statistics.mean(ratios), 5)
                entry[f"hv_ratio_{name}_min"] = round(min(ratios), 5)
                entry[f"seeds_below_0.95_{name}"] = sum(r < 0.95 for r in ratios)
                entry[f"seeds_below_0.90_{name}"] = sum(r < 0.90 for r in ratios)
            summary["by_sampler"][f"{sampler}@{budget}"] = entry
    return rows, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, help="a sweep's run folders: consolidated into OUT/trials.csv.gz first")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budgets", type=int, nargs="+", default=[150, 300])
    parser.add_argument("--pruned-arm", default="dominated_throughput")
    args = parser.parse_args(argv)
    trials = args.out / "trials.csv.gz"
    if args.runs is not None:
        if not args.runs.is_dir():
            fail(f"no sweep folder {args.runs}")
        consolidate(args.runs, trials)
    if not trials.is_file():
        fail(f"no {trials}: name the sweep's folder with --runs")
    rows, summary = analyze(read_trials(trials), args.budgets, args.pruned_arm)
    if not rows:
        fail(f"no pairs of pruned and unpruned searches in {trials}")
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "measured.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "measured_summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    for key, entry in summary["by_sampler"].items():
        print(f"{key:>14}: {entry['seeds']} seeds, trainings saved {entry['trainings_saved_mean']:.1%}; HV ratio "
              f"measured mean {entry['hv_ratio_measured_mean']:.4f} min {entry['hv_ratio_measured_min']:.4f}; "
              f"predicted mean {entry['hv_ratio_predicted_mean']:.4f} min {entry['hv_ratio_predicted_min']:.4f}")
    low = [r for r in rows if r["hv_ratio_measured"] < 0.95]
    slower = [r for r in low if r["fastest_pruned_measured"] < r["fastest_baseline_measured"]]
    print(f"pairs below 0.95 of the measured hypervolume: {len(low)}; in {len(slower)} of them the pruned search's "
          f"fastest trained cell is slower than the unpruned one's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
