"""Which model should rank the front's fast end: the anchors' measured ranks on NAS-Bench-201, no GPU.

    python benchmarks/anchor_ranking.py --seeds 130-149 --count 4 --out benchmarks/results/cpu/anchor_ranking

For each seed, the `count` anchors `nasutil.search.anchors.fast_end` returns (the search's own seed, the shipped
H200 profile, accuracy against throughput, fp16 batch 256 CUDA graph), with the short search ranked on the
learned model (what the search predicts with) and on the profile's operator sum (`fast_end_ranker`), each with
128 and 256 predictions: each anchor's rank among all 15,625 cells by the throughput measured on the H200 (the
shipped `nb201_h200` table, rank 0 the fastest), whether they hold the measured fastest cell, how many of the
measured top `count` they hold, and the seconds the short search took on this machine. Also, over all 15,625
cells, where each model puts the measured fastest cells: the learned model's trees cannot predict past the
latencies they were fitted on, and the fast end lies at that edge.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path

import numpy as np
import optuna

from nasutil.data.measured import measured_table
from nasutil.predictor import make_predictor
from nasutil.registry import get_space
from nasutil.search.anchors import fast_end
from nasutil.search.objectives import Objectives

RANKERS = ("learned", "operators")
LENGTHS = (128, 256)


def seeds_of(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def whole_space(predictors: dict, measured: dict[str, float], top: int) -> dict:
    """For each model, the measured ranks of its `top` predicted fastest cells, in its order, and its
    predicted over measured latency of the measured fastest cell."""
    archs = sorted(measured, key=measured.get)
    out = {}
    for name, predictor in predictors.items():
        latencies = np.array([p.latency_ms for p in predictor.predict_many("nb201", archs, predictor.target())])
        order = np.argsort(latencies, kind="stable")
        out[name] = {"measured_ranks_of_predicted_fastest": [int(i) for i in order[:top]],
                     "fastest_predicted_over_measured": round(float(latencies[0] / measured[archs[0]]), 3),
                     "cells_within_2pct_of_its_prediction_of_the_fastest":
                         int((np.abs(latencies / latencies[0] - 1) <= 0.02).sum())}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="130-149", help="FIRST-LAST")
    parser.add_argument("--count", type=int, default=4, help="anchors wanted")
    parser.add_argument("--out", type=Path, required=True, help="folder for anchor_ranking.{csv,json}")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    measured = {arch: row["latency_ms"] for arch, row in measured_table("nb201_h200").rows.items()}
    rank = {arch: i for i, arch in enumerate(sorted(measured, key=measured.get))}
    fastest = min(measured, key=measured.get)
    space, search_predictor = get_space("nb201"), make_predictor(profile="h200")
    rankers = {"learned": search_predictor, "operators": make_predictor("operators", profile="h200")}
    objectives = Objectives.from_config({"metrics": ["accuracy", "throughput"]})
    fast_end(space, "nb201", search_predictor, search_predictor.target(), objectives, 1, 0)  # warm: models loaded
    rows = []
    for seed in seeds_of(args.seeds):
        for name in RANKERS:
            for predictions in LENGTHS:
                started = time.perf_counter()
                params = fast_end(space, "nb201", search_predictor, search_predictor.target(), objectives,
                                  args.count, seed, predictions=predictions, ranker=rankers[name])
                seconds = time.perf_counter() - started
                ranks = sorted(rank[space.suggest(optuna.trial.FixedTrial(p)).to_string()] for p in params)
                rows.append({"seed": seed, "ranker": name, "predictions": predictions, "count": args.count,
                             "measured_ranks": " ".join(map(str, ranks)), "holds_fastest_measured": int(ranks[0] == 0),
                             "in_measured_top": sum(r < args.count for r in ranks), "worst_measured_rank": ranks[-1],
                             "seconds": round(seconds, 3)})
                print(rows[-1], flush=True)
    summary = {}
    for name in RANKERS:
        for predictions in LENGTHS:
            mine = [r for r in rows if r["ranker"] == name and r["predictions"] == predictions]
            summary[f"{name}_{predictions}"] = {
                "seeds": len(mine), "hold_fastest_measured": sum(r["holds_fastest_measured"] for r in mine),
                "worst_measured_rank": max(r["worst_measured_rank"] for r in mine),
                "median_seconds": round(statistics.median(r["seconds"] for r in mine), 2)}
    report = {"command": "python benchmarks/anchor_ranking.py --seeds " + args.seeds + f" --count {args.count}",
              "count": args.count, "seeds": args.seeds, "table": measured_table("nb201_h200").note,
              "summary": summary, "whole_space": whole_space(rankers, measured, 16)}
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "anchor_ranking.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "anchor_ranking.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report["summary"], indent=1))
    print(json.dumps(report["whole_space"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
