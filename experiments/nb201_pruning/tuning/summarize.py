"""Summarise policy-tuning sweeps of the nb201 pruning experiment: each pruned arm against the
unpruned search of the same sampler and seed (trainings saved, hypervolume ratio, seeds meeting the
goal of >= 50% fewer trainings for >= 99% of the hypervolume).

    python experiments/nb201_pruning/tuning/summarize.py RUNS_DIR [RUNS_DIR ...] --out NAME

Each RUNS_DIR holds `<arm>/s<seed>/{trials.csv,summary.json}` folders (a Hydra sweep directory); the
unpruned arms are `<sampler>-none`, and a pruned arm `<sampler>-<anything else>` is paired with the
unpruned arm of its sampler, looked up in every RUNS_DIR given. Writes `<NAME>.csv` (one row an arm)
and `<NAME>_per_seed.csv` next to this script.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

from nasutil.search.objectives import hypervolume_2d
from nasutil.search.trainers.tabular import accuracy_table

HERE = Path(__file__).resolve().parent


def reference() -> tuple[float, float]:
    table = accuracy_table()
    with (HERE.parent / "predicted_h200.csv").open() as f:
        predicted = {r["arch"]: float(r["throughput_per_s"]) for r in csv.DictReader(f)}
    return (min(table[a]["cifar10_test_200ep"] for a in predicted), min(predicted.values()))


def load(dirs: list[Path], ref) -> dict[tuple[str, int], dict]:
    runs = {}
    for d in dirs:
        for path in sorted(d.glob("*/s*/summary.json")):
            summary = json.loads(path.read_text())
            with (path.parent / "trials.csv").open() as f:
                trials = list(csv.DictReader(f))
            points = [(float(t["accuracy"]), float(t["predicted_throughput_per_s"])) for t in trials
                      if t["outcome"] == "trained"]
            runs[(path.parent.parent.name, int(summary["seed"]))] = {
                "trainings": len(points), "hypervolume": hypervolume_2d(points, ref),
                "pruned": sum(t["outcome"] == "pruned_before_training" for t in trials)}
    return runs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    runs = load(args.dirs, reference())
    rows, per_seed = [], []
    for arm in sorted({a for a, _ in runs}):
        sampler, _, policy = arm.partition("-")
        if policy == "none":
            continue
        seeds = sorted(s for a, s in runs if a == arm and (f"{sampler}-none", s) in runs)
        hv, saved = [], []
        for s in seeds:
            p, b = runs[(arm, s)], runs[(f"{sampler}-none", s)]
            hv.append(p["hypervolume"] / b["hypervolume"])
            saved.append(1 - p["trainings"] / b["trainings"])
            per_seed.append({"arm": arm, "seed": s, "trainings": p["trainings"], "baseline_trainings": b["trainings"],
                             "pruned": p["pruned"], "trainings_saved": round(saved[-1], 4), "hv_ratio": round(hv[-1], 4),
                             "goal_met": hv[-1] >= 0.99 and saved[-1] >= 0.5})
        if not seeds:
            continue
        rows.append({"arm": arm, "seeds": f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 else str(seeds[0]),
                     "n": len(seeds), "trainings_mean": round(statistics.fmean(runs[(arm, s)]["trainings"] for s in seeds), 1),
                     "saved_mean": round(statistics.fmean(saved), 4), "saved_min": round(min(saved), 4),
                     "hv_ratio_mean": round(statistics.fmean(hv), 4), "hv_ratio_min": round(min(hv), 4),
                     "seeds_hv_ge_0.99": sum(h >= 0.99 for h in hv), "seeds_saved_ge_50pct": sum(x >= 0.5 for x in saved),
                     "seeds_goal_met": sum(h >= 0.99 and x >= 0.5 for h, x in zip(hv, saved)),
                     "goal_met_on_mean": statistics.fmean(saved) >= 0.5 and statistics.fmean(hv) >= 0.99})
    for name, data in ((args.out, rows), (f"{args.out}_per_seed", per_seed)):
        with (HERE / f"{name}.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)
    for r in rows:
        print(", ".join(f"{k}={v}" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
