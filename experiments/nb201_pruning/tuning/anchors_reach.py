"""How far down the predictor's own ranking a search's anchors reach, with the short search's old and new length.

    python experiments/nb201_pruning/tuning/anchors_reach.py --seeds 1300-1319 --count 16 \
        --out experiments/nb201_pruning/results/measured_v6/anchors_reach.csv

For each seed, the `count` anchors `nasutil.search.anchors.fast_end` returns (the search's own seed, the H200
profile, accuracy against throughput) with 128 predictions (the length before) and with the length it uses now
(32 a candidate wanted, at least 128): each anchor's rank among all 15,625 cells by predicted throughput
(`results/predicted_h200.csv`), how many of the predictor's own top `count` they hold, the worst rank among them,
whether they hold the cell that measures fastest on the H200 (the shipped measured table), and the seconds the
short search took on this machine.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import optuna

from nasutil.data.measured import measured_table
from nasutil.predictor import make_predictor
from nasutil.registry import get_space
from nasutil.search.anchors import PREDICTIONS_PER_ANCHOR, fast_end
from nasutil.search.objectives import Objectives

HERE = Path(__file__).resolve().parents[1]
MIN_PREDICTIONS = 128  # the short search's least length when this ran (256 since)


def seeds_of(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="1300-1319", help="FIRST-LAST")
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with (HERE / "results" / "predicted_h200.csv").open(newline="") as f:
        predicted = {r["arch"]: float(r["throughput_per_s"]) for r in csv.DictReader(f)}
    rank = {arch: i + 1 for i, arch in enumerate(sorted(predicted, key=predicted.get, reverse=True))}
    measured = {arch: row["throughput_per_s"] for arch, row in measured_table("nb201_h200").rows.items()}
    fastest = max(measured, key=measured.get)
    space, predictor = get_space("nb201"), make_predictor(profile="h200")
    objectives = Objectives.from_config({"metrics": ["accuracy", "throughput"]})
    now = max(MIN_PREDICTIONS, PREDICTIONS_PER_ANCHOR * args.count)
    rows = []
    for seed in seeds_of(args.seeds):
        for predictions in (MIN_PREDICTIONS, now):
            started = time.perf_counter()
            params = fast_end(space, "nb201", predictor, predictor.target(), objectives, args.count, seed,
                              predictions=predictions, ranker=predictor)  # ranked on the learned model, as then
            seconds = time.perf_counter() - started
            archs = [space.suggest(optuna.trial.FixedTrial(p)).to_string() for p in params]
            ranks = sorted(rank[a] for a in archs)
            rows.append({"seed": seed, "predictions": predictions, "count": args.count,
                         "in_predicted_top": sum(r <= args.count for r in ranks), "worst_rank": ranks[-1],
                         "holds_fastest_measured": int(fastest in archs), "fastest_measured_rank": rank[fastest], "seconds": round(seconds, 2)})
            print(rows[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
