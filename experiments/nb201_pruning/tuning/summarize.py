"""Summarise policy-tuning sweeps of the nb201 pruning experiment: each pruned arm against the
unpruned search of the same sampler and seed (trainings saved, hypervolume ratio, seeds meeting the
goal of >= 50% fewer trainings for >= 99% of the hypervolume).

    python experiments/nb201_pruning/tuning/summarize.py SOURCE [SOURCE ...] --out NAME [--out-dir DIR]

A SOURCE is a consolidated trials file (`results/trials.csv.gz`, the experiment's own searches) or a
Hydra sweep directory of `<arm>/s<seed>/{trials.csv,summary.json}` folders (`tuning/runs/grid`,
`tuning/runs/confirm`, as `tune.sh` writes them). The unpruned arms are `<sampler>-none`, and a
pruned arm `<sampler>-<anything else>` is paired with the unpruned arm of its sampler, looked up in
every SOURCE given. Writes `<NAME>.csv` (one row an arm) and `<NAME>_per_seed.csv` into DIR
(default `results/tuning/`).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

from nasutil.errors import fail
from nasutil.pareto import hypervolume_2d

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import analyze  # noqa: E402  (the experiment's analysis: its trials reader, reference point and trained points)


def load(sources: list[Path], ref) -> dict[tuple[str, int], dict]:
    runs = {}
    for source in sources:
        searches = analyze.read_runs(source) if source.is_file() else analyze.group_runs(analyze.collect_runs(source))
        for run in searches:
            points = analyze.trained_points(run["trials"])
            runs[(run["arm"], run["seed"])] = {
                "trainings": len(points), "hypervolume": hypervolume_2d(points, ref),
                "pruned": sum(t["outcome"] == "pruned_before_training" for t in run["trials"])}
    return runs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+", type=Path, help="trials.csv.gz files or sweep directories")
    ap.add_argument("--out", required=True, help="name of the CSVs written")
    ap.add_argument("--out-dir", type=Path, default=analyze.RESULTS / "tuning")
    args = ap.parse_args()
    missing = [str(s) for s in args.sources if not s.exists()]
    if missing:
        fail(f"error: no such file or folder: {', '.join(missing)}")
    runs = load(args.sources, analyze.reference_point(analyze.read_cells(analyze.RESULTS)))
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
    if not rows:
        fail("error: no pruned arm with an unpruned arm of the same sampler and seed in the sources")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in ((args.out, rows), (f"{args.out}_per_seed", per_seed)):
        with (args.out_dir / f"{name}.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0]))
            w.writeheader()
            w.writerows(data)
    for r in rows:
        print(", ".join(f"{k}={v}" for k, v in r.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
