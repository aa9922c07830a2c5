"""Compare the searches of the nb201 pruning experiment: trainings spent, hypervolume, true front.

Reads the trials of every search from `results/trials.csv.gz` (one row a trial, with its search's arm,
seed, `pruned_as` and wall time), the bundled NAS-Bench-201 accuracy table and
`results/predicted_h200.csv`, and writes into `results/`: `results.csv` (one row a search),
`summary.json` (per arm, and pruned vs unpruned paired by seed) and the plots `hv_vs_trainings.png`
and `fronts.png`.

When `runs/` holds a sweep's run folders (`runs/<arm>/s<seed>/{trials.csv,summary.json}`, as
`run.sh` writes them), they are first consolidated into `results/trials.csv.gz`, replacing it.

Objectives: 200-epoch CIFAR-10 test accuracy (%) and predicted H200 throughput (images/s, fp16,
batch 256, CUDA graph), both maximised. Hypervolume reference point: the worst accuracy and the
worst predicted throughput over all 15,625 cells.

    python experiments/nb201_pruning/analyze.py
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from nasutil.data.nasbench201 import accuracy_table
from nasutil.errors import fail
from nasutil.pareto import front_2d, hypervolume_2d

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
RUN_COLUMNS = ("arm", "seed", "pruned_as", "wall_s")
# the columns of a search's trials.csv that the consolidated file keeps (the rest follow from the arch:
# the other predicted figures, FLOPs, params, the 12-epoch accuracy; or are timestamps)
TRIAL_COLUMNS = ("number", "outcome", "state", "generation", "arch", "accuracy", "predicted_throughput_per_s",
                 "estimated_accuracy", "duplicate_of", "prune_reason")


# ---------------------------------------------------------------- the trials of every search

def collect_runs(runs: Path) -> list[dict]:
    """The trials of every run folder under `runs` (a Hydra sweep directory), one row a trial."""
    rows = []
    for summary_path in sorted(runs.glob("*/s*/summary.json")):
        summary = json.loads(summary_path.read_text())
        run = {"arm": summary_path.parent.parent.name, "seed": summary["seed"],
               "pruned_as": summary.get("pruned_as", ""), "wall_s": summary["wall_s"]}
        with (summary_path.parent / "trials.csv").open(newline="") as f:
            trials = sorted(csv.DictReader(f), key=lambda r: int(r["number"]))
        rows += [{**run, **{k: t.get(k, "") for k in TRIAL_COLUMNS}} for t in trials]
    return rows


def write_trials(path: Path, rows: list[dict]) -> None:
    """The consolidated trials as gzip CSV (the same rows give the same bytes)."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=RUN_COLUMNS + TRIAL_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_bytes(gzip.compress(text.getvalue().encode(), mtime=0))


def read_runs(path: Path) -> list[dict]:
    """The searches of a consolidated trials file, in its order: arm, seed, pruned_as, wall_s and trials."""
    with gzip.open(path, "rt", newline="") as f:
        return group_runs(list(csv.DictReader(f)))


def group_runs(rows: list[dict]) -> list[dict]:
    """Trial rows (as `collect_runs` gives them) grouped by search, in their order."""
    runs: dict[tuple[str, int], dict] = {}
    for row in rows:
        key = (row["arm"], int(row["seed"]))
        if key not in runs:
            runs[key] = {"arm": key[0], "seed": key[1], "pruned_as": row["pruned_as"], "wall_s": float(row["wall_s"]),
                         "trials": []}
        runs[key]["trials"].append({k: row[k] for k in TRIAL_COLUMNS})
    return list(runs.values())


def trials_file(runs: Path, results: Path) -> Path:
    """`results/trials.csv.gz`, first rewritten from `runs` where that holds a sweep's run folders."""
    path = results / "trials.csv.gz"
    rows = collect_runs(runs) if runs.is_dir() else []
    if rows:
        write_trials(path, rows)
        print(f"consolidated {len({(r['arm'], r['seed']) for r in rows})} runs ({len(rows)} trials) from {runs} "
              f"into {path}", file=sys.stderr)
    elif not path.is_file():
        fail(f"error: neither run folders under {runs} nor {path}: run the sweep first (see README.md)")
    return path


# ---------------------------------------------------------------- the analysis

def front_of(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (accuracy, throughput) points, fastest first."""
    return front_2d(points, x=lambda p: p[1], y=lambda p: p[0])


def read_cells(results: Path) -> dict[str, tuple[float, float]]:
    """Every cell's (200-epoch CIFAR-10 accuracy, predicted throughput)."""
    table = accuracy_table()
    with (results / "predicted_h200.csv").open() as f:
        predicted = {r["arch"]: float(r["throughput_per_s"]) for r in csv.DictReader(f)}
    return {a: (table[a]["cifar10_test_200ep"], t) for a, t in predicted.items()}


def reference_point(cells: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """The worst accuracy and the worst predicted throughput over all cells."""
    return min(a for a, _ in cells.values()), min(t for _, t in cells.values())


def trained_points(trials: list[dict]) -> list[tuple[float, float]]:
    """(accuracy, predicted throughput) of the trained candidates, in trial order."""
    return [(float(t["accuracy"]), float(t["predicted_throughput_per_s"]))
            for t in sorted(trials, key=lambda r: int(r["number"])) if t["outcome"] == "trained"]


def analyze(runs: list[dict], cells: dict[str, tuple[float, float]]) -> tuple[list[dict], dict, dict]:
    """One result row a search, the hypervolume-per-training curves per arm, and the summary."""
    ref = reference_point(cells)
    true_front = front_of(list(cells.values()))
    true_front_archs = {a for a, p in cells.items() if p in set(true_front)}
    true_hv = hypervolume_2d(true_front, ref)
    acc_range = max(a for a, _ in cells.values()) - ref[0]
    thr_range = max(t for _, t in cells.values()) - ref[1]

    results, curves = [], defaultdict(list)
    for run in runs:
        trials = run["trials"]
        points = trained_points(trials)
        curve = [hypervolume_2d(points[:i], ref) / true_hv for i in range(1, len(points) + 1)]
        found = front_of(points)
        igd = statistics.fmean(min(((a - fa) / acc_range) ** 2 + ((t - ft) / thr_range) ** 2 for fa, ft in found) ** 0.5
                               for a, t in true_front)
        archs = {t["arch"] for t in trials if t["outcome"] == "trained"}
        generations = {int(t["generation"]) for t in trials if t["generation"]}
        results.append({
            "arm": run["arm"], "seed": run["seed"], "pruned_as": run["pruned_as"], "trials": len(trials),
            "trainings": len(points), "pruned_before_training": sum(t["outcome"] == "pruned_before_training" for t in trials),
            "repeats": sum(t["outcome"] == "repeat" for t in trials), "failed": sum(t["outcome"] == "failed" for t in trials),
            "generations": max(generations) + 1 if generations else 0,
            "hypervolume": hypervolume_2d(points, ref), "hv_ratio_to_true": curve[-1] if curve else 0.0,
            "igd_normalised": igd, "true_front_cells_found": len(archs & true_front_archs),
            "best_accuracy": max(a for a, _ in points), "wall_s": run["wall_s"]})
        curves[run["arm"]].append(curve)

    arms: dict[str, dict] = {}
    for arm in sorted({r["arm"] for r in results}):
        rs = [r for r in results if r["arm"] == arm]
        arms[arm] = {"runs": len(rs), "pruned_as": sorted({r["pruned_as"] for r in rs}), **{k: {"mean": statistics.fmean(r[k] for r in rs),
                                             "std": statistics.pstdev(r[k] for r in rs),
                                             "min": min(r[k] for r in rs), "max": max(r[k] for r in rs)}
                                         for k in ("trainings", "pruned_before_training", "generations", "hv_ratio_to_true",
                                                   "igd_normalised", "true_front_cells_found", "best_accuracy")}}
    paired = {}
    by = {(r["arm"], r["seed"]): r for r in results}
    for arm in arms:
        sampler, _, policy = arm.partition("-")
        base = f"{sampler}-none"
        if policy == "none" or base not in arms:
            continue
        pairs = [(by[(arm, s)], by[(base, s)]) for (a, s) in by if a == arm and (base, s) in by]
        hv = [p["hypervolume"] / b["hypervolume"] for p, b in pairs]
        saved = [1 - p["trainings"] / b["trainings"] for p, b in pairs]
        paired[f"{arm} vs {base}"] = {
            "seeds": len(pairs), "hv_ratio_mean": statistics.fmean(hv), "hv_ratio_min": min(hv),
            "trainings_saved_mean": statistics.fmean(saved), "trainings_saved_min": min(saved),
            "hv_ratio_stdev": statistics.stdev(hv) if len(hv) > 1 else 0.0,
            "hv_goal_seeds": sum(h >= 0.99 for h in hv), "trainings_goal_seeds": sum(s >= 0.5 for s in saved),
            "seeds_hv_below_0.90": sum(h < 0.90 for h in hv),
            "goal_met_seeds": sum(h >= 0.99 and s >= 0.5 for h, s in zip(hv, saved)),
            "per_seed": {str(p["seed"]): {"hv_ratio": round(h, 4), "trainings_saved": round(sv, 4)}
                         for (p, _), h, sv in zip(pairs, hv, saved)}}
    # What the per-seed ratio shows without any pruning: unpruned seed s against unpruned seed s+1 (the
    # next seed run, cyclically). A sampler that learns follows another trajectory once one trial
    # differs, so a pruned search's ratio mixes what pruning lost with this seed-to-seed spread.
    seed_noise = {}
    for arm in arms:
        if not arm.endswith("-none"):
            continue
        seeds = sorted(s for (a, s) in by if a == arm)
        ratios = [by[(arm, s)]["hypervolume"] / by[(arm, seeds[(i + 1) % len(seeds)])]["hypervolume"]
                  for i, s in enumerate(seeds)]
        if len(ratios) > 1:
            seed_noise[arm] = {"pairs": len(ratios), "hv_ratio_mean": statistics.fmean(ratios),
                               "hv_ratio_min": min(ratios), "seeds_hv_below_0.90": sum(r < 0.90 for r in ratios)}
    summary = {"objectives": ["cifar10_test_200ep accuracy (%)", "predicted H200 throughput (images/s)"],
               "reference_point": {"accuracy": ref[0], "throughput_per_s": ref[1]},
               "true_front": {"cells": len(true_front), "hypervolume": true_hv}, "arms": arms, "paired": paired,
               "seed_noise": seed_noise}
    return results, curves, summary


def results_csv(results: list[dict]) -> str:
    """results.csv's text: one row a search."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(results[0]))
    writer.writeheader()
    writer.writerows({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()} for r in results)
    return text.getvalue()


def summary_json(summary: dict) -> str:
    return json.dumps(summary, indent=2) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=HERE / "runs",
                        help="a sweep's run folders to consolidate first, where there are any (default: runs/)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    runs = read_runs(trials_file(args.runs, args.results))
    if not runs:
        fail(f"error: {args.results / 'trials.csv.gz'} holds no trials")
    cells = read_cells(args.results)
    results, curves, summary = analyze(runs, cells)
    with (args.results / "results.csv").open("w", newline="") as f:
        f.write(results_csv(results))
    (args.results / "summary.json").write_text(summary_json(summary))
    plot(curves, runs, cells, front_of(list(cells.values())), args.results)
    print(json.dumps({"reference_point": summary["reference_point"], "paired": summary["paired"],
                      **{a: {k: round(v["mean"], 4) for k, v in s.items() if isinstance(v, dict)}
                         for a, s in summary["arms"].items()}},
                     indent=1))
    return 0


def plot(curves, runs, cells, true_front, folder: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    for arm, arm_curves in sorted(curves.items()):
        longest = max(len(c) for c in arm_curves)
        mean = [statistics.fmean(c[min(i, len(c) - 1)] for c in arm_curves) for i in range(longest)]
        ax.plot(range(1, longest + 1), mean, label=f"{arm} ({len(arm_curves)} seeds)")
    ax.set_xlabel("trainings spent")
    ax.set_ylabel("hypervolume / true front's")
    ax.set_ylim(0.0, 1.0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("NAS-Bench-201, CIFAR-10 200-epoch accuracy vs predicted H200 throughput", fontsize=9)
    fig.savefig(folder / "hv_vs_trainings.png")

    fig = Figure(figsize=(7.5, 5), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    ax.scatter([t for _, t in cells.values()], [a for a, _ in cells.values()], s=2, color="0.85",
               label="all 15,625 cells")
    ax.step([t for _, t in true_front], [a for a, _ in true_front], where="post", color="black", lw=1.5,
            label="true front")
    first = min(run["seed"] for run in runs)  # the fronts of one seed, the lowest run
    seed0 = {run["arm"]: run for run in runs if run["seed"] == first}
    for arm in sorted(seed0):
        fr = front_of(trained_points(seed0[arm]["trials"]))
        ax.step([t for _, t in fr], [a for a, _ in fr], where="post", lw=1.1, label=f"{arm}, seed {first}")
    ax.set_ylim(80, 95)
    ax.set_xlabel("predicted H200 throughput (images/s, fp16, batch 256, CUDA graph)")
    ax.set_ylabel("CIFAR-10 test accuracy after 200 epochs (%)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.savefig(folder / "fronts.png")


if __name__ == "__main__":
    sys.exit(main())
