"""How the operator-level predictor does on a space it never saw, and how many measurements calibrate it.

    python benchmarks/calibration_unseen.py --out benchmarks/results/h200

The held-out space is `mbconv`, whose networks were measured on the H200 (fp16, batch 256, CUDA graph:
`predictor_data_mbconv.csv`: 326 rows of 168 distinct networks at 224x224; a network measured more than
once counts once, at its median latency). From the shipped H200 profile's operator table
every op that only mbconv networks launch is removed (ops that the other spaces' measured networks
also launch stay), and so are the overlap constants fitted on mbconv's networks; the shared overlap
constants, which the shipped profile fitted on every space's networks mbconv's included, are refitted
on the other spaces' measured networks (nb201, darts, nb101). The model then knows those spaces alone.

- zero-shot: mbconv predicted with that model (ops it never timed are interpolated from their nearest
  timed neighbours, and the shared overlap constants apply);
- calibrated on N: the overlap constants for mbconv fitted (`fit_overlap`, what `nasutil profile fit`
  does) on N measured networks drawn at random from a calibration pool (networks, not rows: no network
  is in both the pool and the test set), then the held-out test set
  predicted; N = 3, 10, 30, five draws each;
- the shipped profile, which saw mbconv (its op table and constants), on the same test set: where a
  profile fitted on the space lands.

Errors on the test set (118 networks never used for calibration; the shipped profile's row is not
held out: that profile was fitted on mbconv): share within +-10%, mean absolute
relative error, median signed error, Kendall tau. Writes calibration_unseen.json. No GPU needed: the
measurements are the committed ones.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import statistics
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from nasutil.predictor.fit import ops_for
from nasutil.predictor.op_tables import OpTableModel, fit_overlap
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.profile import load_profile
from nasutil.registry import get_space

HERE = Path(__file__).resolve().parent
DATA = HERE / "results" / "h200"
TARGET = PredictTarget("NVIDIA H200", "fp16", 256, "cudagraph")
OTHER_SPACES = ("nb201", "darts", "nb101")


def measured(space: str, path: Path) -> list[tuple[str, int, float]]:
    with path.open() as f:
        return [(r["arch"], int(r["input_size"]), float(r["latency_ms"])) for r in csv.DictReader(f)
                if r["status"] == "ok" and r["dtype"] == TARGET.dtype and int(r["batch_size"]) == TARGET.batch_size
                and r["mode"] == TARGET.mode]


def errors(model: OpTableModel, nets: list[tuple[list, float]], space: str) -> dict:
    predicted = np.array([model.predict_latency_ms(ops, TARGET, space) for ops, _ in nets])
    actual = np.array([latency for _, latency in nets])
    rel = predicted / actual - 1
    return {"within_10pct": float(np.mean(np.abs(rel) <= 0.10)), "mape": float(np.mean(np.abs(rel))),
            "median_signed": float(np.median(rel)), "kendall_tau": float(kendalltau(predicted, actual)[0]),
            "worst": float(rel[np.argmax(np.abs(rel))])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--test", type=int, default=118, help="networks in the test set (the rest: the pool)")
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 10, 30])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    mbconv = get_space("mbconv")
    rows: dict[tuple[str, int], list[float]] = {}
    for a, size, latency in measured("mbconv", DATA / "predictor_data_mbconv.csv"):
        rows.setdefault((a, size), []).append(latency)  # a network measured more than once is one network
    held = [(ops_for(mbconv, a, size)[0], statistics.median(v)) for (a, size), v in rows.items()]
    others = {}
    for name in OTHER_SPACES:
        space = get_space(name)
        latencies: dict[tuple[str, int], list[float]] = {}
        for a, size, latency in measured(name, DATA / f"predictor_data_{name}.csv"):
            latencies.setdefault((a, size), []).append(latency)
        others[name] = [(ops_for(space, a, size)[0], statistics.median(v)) for (a, size), v in latencies.items()]
    seen_ops = {op for nets in others.values() for ops, _ in nets for op in ops}
    mbconv_ops = {op for ops, _ in held for op in ops}

    shipped = load_profile("h200")
    table = next(t for t in shipped.operators if t.key == f"{TARGET.dtype}/{TARGET.batch_size}/{TARGET.mode}")
    blind = copy.deepcopy(table)
    blind.times_us = {op: t for op, t in table.times_us.items() if op not in mbconv_ops or op in seen_ops}
    blind.by_space = {k: v for k, v in table.by_space.items() if k != "mbconv"}
    fit_overlap(blind, OpTableModel([blind]), TARGET, [net for nets in others.values() for net in nets])
    removed = len(table.times_us) - len(blind.times_us)

    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(held))
    test = [held[i] for i in order[:args.test]]
    pool = [held[i] for i in order[args.test:]]

    result = {"held_out_space": "mbconv", "target": TARGET.key, "rows": sum(len(v) for v in rows.values()),
              "networks": len(held), "test": len(test),
              "pool": len(pool), "table_ops": len(table.times_us), "ops_removed": removed,
              "mbconv_ops_never_timed_after_removal": len({op for op in mbconv_ops if op not in blind.times_us}),
              "shared_constants_refitted_on": {name: len(nets) for name, nets in others.items()},
              "shipped": errors(OpTableModel([table]), test, "mbconv"),
              "zero_shot": errors(OpTableModel([blind]), test, "mbconv"), "calibrated": {}}
    print("shipped (saw mbconv)", result["shipped"], flush=True)
    print("zero-shot", result["zero_shot"], flush=True)
    for n in args.sizes:
        runs = []
        for _ in range(args.draws):
            chosen = [pool[i] for i in rng.choice(len(pool), size=n, replace=False)]
            tuned = copy.deepcopy(blind)
            model = OpTableModel([tuned])
            fit_overlap(tuned, model, TARGET, chosen, space="mbconv")
            runs.append(errors(OpTableModel([tuned]), test, "mbconv"))
        summary = {key: {"mean": statistics.fmean(r[key] for r in runs), "min": min(r[key] for r in runs),
                         "max": max(r[key] for r in runs)} for key in runs[0]}
        result["calibrated"][str(n)] = {"draws": runs, **summary}
        print(f"calibrated on {n}", {k: round(v["mean"], 4) for k, v in summary.items()}, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "calibration_unseen.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
