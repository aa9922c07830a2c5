"""Compare the searches of the nb201 pruning experiment: trainings spent, hypervolume, true front.

Reads every run under `runs/` (trials.csv + summary.json), the bundled NAS-Bench-201 accuracy table
and `predicted_h200.csv`, and writes `results.csv` (one row a run), `summary.json` (per arm, and
pruned vs unpruned paired by seed) and the plots `hv_vs_trainings.png` and `fronts.png`.

Objectives: 200-epoch CIFAR-10 test accuracy (%) and predicted H200 throughput (images/s, fp16,
batch 256, CUDA graph), both maximised. Hypervolume reference point: the worst accuracy and the
worst predicted throughput over all 15,625 cells.

    python experiments/nb201_pruning/analyze.py
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from nasutil.search.objectives import hypervolume_2d
from nasutil.search.trainers.tabular import accuracy_table

HERE = Path(__file__).resolve().parent


def front_of(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (accuracy, throughput) points, fastest first."""
    out, best = [], float("-inf")
    for acc, thr in sorted(points, key=lambda p: (-p[1], -p[0])):
        if acc > best:
            out.append((acc, thr))
            best = acc
    return out


def main() -> int:
    table = accuracy_table()
    with (HERE / "predicted_h200.csv").open() as f:
        predicted = {r["arch"]: float(r["throughput_per_s"]) for r in csv.DictReader(f)}
    cells = {a: (table[a]["cifar10_test_200ep"], t) for a, t in predicted.items()}
    ref = (min(a for a, _ in cells.values()), min(t for _, t in cells.values()))
    true_front = front_of(list(cells.values()))
    true_front_archs = {a for a, p in cells.items() if p in set(true_front)}
    true_hv = hypervolume_2d(true_front, ref)
    acc_range = max(a for a, _ in cells.values()) - ref[0]
    thr_range = max(t for _, t in cells.values()) - ref[1]

    results, curves = [], defaultdict(list)
    for summary_path in sorted((HERE / "runs").glob("*/s*/summary.json")):
        summary = json.loads(summary_path.read_text())
        arm = summary_path.parent.parent.name
        with (summary_path.parent / "trials.csv").open() as f:
            trials = list(csv.DictReader(f))
        trained, curve, points = 0, [], []
        for t in sorted(trials, key=lambda r: int(r["number"])):
            if t["outcome"] == "trained":
                trained += 1
                points.append((float(t["accuracy"]), float(t["predicted_throughput_per_s"])))
                curve.append(hypervolume_2d(points, ref) / true_hv)
        found = front_of(points)
        igd = statistics.fmean(min(((a - fa) / acc_range) ** 2 + ((t - ft) / thr_range) ** 2 for fa, ft in found) ** 0.5
                               for a, t in true_front)
        archs = {t["arch"] for t in trials if t["outcome"] == "trained"}
        generations = {int(t["generation"]) for t in trials if t["generation"]}
        results.append({
            "arm": arm, "seed": summary["seed"], "pruned_as": summary.get("pruned_as", ""), "trials": len(trials),
            "trainings": trained, "pruned_before_training": sum(t["outcome"] == "pruned_before_training" for t in trials),
            "repeats": sum(t["outcome"] == "repeat" for t in trials), "failed": sum(t["outcome"] == "failed" for t in trials),
            "generations": max(generations) + 1 if generations else 0,
            "hypervolume": hypervolume_2d(points, ref), "hv_ratio_to_true": curve[-1] if curve else 0.0,
            "igd_normalised": igd, "true_front_cells_found": len(archs & true_front_archs),
            "best_accuracy": max(a for a, _ in points), "wall_s": summary["wall_s"]})
        curves[arm].append(curve)
    if not results:
        print("no runs under runs/: run the sweep first (see README.md)", file=sys.stderr)
        return 2

    with (HERE / "results.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()} for r in results)

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
            "hv_goal_seeds": sum(h >= 0.99 for h in hv), "trainings_goal_seeds": sum(s >= 0.5 for s in saved),
            "goal_met_seeds": sum(h >= 0.99 and s >= 0.5 for h, s in zip(hv, saved))}
    out = {"objectives": ["cifar10_test_200ep accuracy (%)", "predicted H200 throughput (images/s)"],
           "reference_point": {"accuracy": ref[0], "throughput_per_s": ref[1]},
           "true_front": {"cells": len(true_front), "hypervolume": true_hv}, "arms": arms, "paired": paired}
    (HERE / "summary.json").write_text(json.dumps(out, indent=2) + "\n")
    plot(curves, results, cells, true_front, HERE)
    print(json.dumps({"reference_point": out["reference_point"], "paired": paired,
                      **{a: {k: round(v["mean"], 4) for k, v in s.items() if isinstance(v, dict)} for a, s in arms.items()}},
                     indent=1))
    return 0


def plot(curves, results, cells, true_front, folder: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5), dpi=120, layout="constrained")
    ax = fig.add_subplot()
    for arm, runs in sorted(curves.items()):
        longest = max(len(c) for c in runs)
        mean = [statistics.fmean(c[min(i, len(c) - 1)] for c in runs) for i in range(longest)]
        ax.plot(range(1, longest + 1), mean, label=f"{arm} ({len(runs)} seeds)")
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
    for arm in sorted({r["arm"] for r in results}):
        path = folder / "runs" / arm / "s0" / "trials.csv"
        if not path.exists():
            continue
        with path.open() as f:
            pts = [(float(t["accuracy"]), float(t["predicted_throughput_per_s"])) for t in csv.DictReader(f)
                   if t["outcome"] == "trained"]
        fr = front_of(pts)
        ax.step([t for _, t in fr], [a for a, _ in fr], where="post", lw=1.1, label=f"{arm}, seed 0")
    ax.set_ylim(80, 95)
    ax.set_xlabel("predicted H200 throughput (images/s, fp16, batch 256, CUDA graph)")
    ax.set_ylabel("CIFAR-10 test accuracy after 200 epochs (%)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.savefig(folder / "fronts.png")


if __name__ == "__main__":
    sys.exit(main())
