"""Predictor accuracy against evaluator measurements on held-out candidates.

    python benchmarks/predictor_bench.py --measurements benchmarks/results/h200 --out benchmarks/results/h200

Reads every nb201 measurement (fp16, batch 256, cudagraph) in the CSVs of --measurements, keeps those
taken at full SM clock, takes the median latency per cell, fits each predictor on a training split and
reports Kendall tau, Spearman rho, MAPE and the share within +-10% on the held-out cells.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, spearmanr

from nasutil.counting import count_model
from nasutil.predictor.analytical import AnalyticalPredictor, calibrate
from nasutil.predictor.base import PredictTarget
from nasutil.predictor.features import operator_features
from nasutil.predictor.learned import LearnedLatencyModel
from nasutil.registry import get_space


def load_measurements(folder: Path, min_clock_mhz: float) -> dict[str, dict]:
    latencies: dict[str, list[float]] = defaultdict(list)
    device = None
    for path in sorted(glob.glob(str(folder / "*.csv"))):
        with open(path) as fh:
            for row in csv.DictReader(fh):
                if (row.get("space") != "nb201" or row.get("status") != "ok" or row.get("dtype") != "fp16"
                        or row.get("batch_size") != "256" or row.get("mode") != "cudagraph"):
                    continue
                if row.get("sm_clock_mhz") and float(row["sm_clock_mhz"]) < min_clock_mhz:
                    continue
                latencies[row["arch"]].append(float(row["latency_ms"]))
                device = row["device_name"]
    return {arch: {"latency_ms": statistics.median(v), "n": len(v), "device": device} for arch, v in latencies.items()}


def metrics(predicted: np.ndarray, measured: np.ndarray) -> dict:
    rel = np.abs(predicted - measured) / measured
    return {"kendall_tau": float(kendalltau(predicted, measured)[0]), "spearman_rho": float(spearmanr(predicted, measured)[0]),
            "mape": float(rel.mean()), "within_10pct": float((rel <= 0.10).mean()), "n": int(len(measured))}


def fit_power_law(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log y = a log x + b: the FLOPs/params baselines."""
    return np.polyfit(np.log(x), np.log(y), 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measurements", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--test", type=int, default=400, help="held-out cells")
    parser.add_argument("--min-clock-mhz", type=float, default=1900.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    data = load_measurements(args.measurements, args.min_clock_mhz)
    archs = sorted(data)
    rng = np.random.default_rng(args.seed)
    rng.shuffle(archs)
    test, train = archs[: args.test], archs[args.test:]
    device = next(iter(data.values()))["device"]
    target = PredictTarget(device_name=device, dtype="fp16", batch_size=256, mode="cudagraph")
    space = get_space("nb201")

    counts, enc = {}, {}
    for arch in archs:
        parsed = space.parse(arch)
        counts[arch] = count_model(space.build(parsed), 32)
        enc[arch] = parsed.encode()
    y = {a: data[a]["latency_ms"] for a in archs}
    y_train, y_test = np.array([y[a] for a in train]), np.array([y[a] for a in test])

    results, timing = {}, {}
    flops = lambda a: counts[a].flops_per_image
    params = lambda a: counts[a].params
    for name, feature in (("flops_baseline", flops), ("params_baseline", params)):
        coef = fit_power_law(np.array([feature(a) for a in train]), y_train)
        pred = np.exp(np.polyval(coef, np.log([feature(a) for a in test])))
        results[name] = metrics(pred, y_test)

    default = AnalyticalPredictor()
    results["analytical_default"] = metrics(np.array([default.predict_latency_ms(counts[a], target) for a in test]), y_test)
    t0 = time.perf_counter()
    model = calibrate([(counts[a], target, y[a]) for a in train[:300]], fixed=("launch_us",))
    timing["calibrate_s"] = time.perf_counter() - t0
    calibrated = AnalyticalPredictor(model)
    t0 = time.perf_counter()
    pred = np.array([calibrated.predict_latency_ms(counts[a], target) for a in test])
    timing["analytical_ms_per_candidate"] = (time.perf_counter() - t0) * 1e3 / len(test)
    results["analytical_calibrated"] = metrics(pred, y_test)

    feats = {a: np.concatenate([enc[a], operator_features(counts[a], target, calibrated)]) for a in archs}
    t0 = time.perf_counter()
    learned = LearnedLatencyModel().fit(np.array([feats[a] for a in train]), y_train)
    timing["learned_fit_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = learned.predict_ms(np.array([feats[a] for a in test]))
    timing["learned_ms_per_candidate_batched"] = (time.perf_counter() - t0) * 1e3 / len(test)
    results["learned"] = metrics(pred, y_test)
    only_enc = LearnedLatencyModel().fit(np.array([enc[a] for a in train]), y_train)
    results["learned_encoding_only"] = metrics(only_enc.predict_ms(np.array([enc[a] for a in test])), y_test)

    t0 = time.perf_counter()
    for a in test[:50]:
        count_model(space.build(space.parse(a)), 32)
    timing["build_and_count_ms_per_candidate"] = (time.perf_counter() - t0) * 1e3 / 50

    summary = {"device": device, "target": target.__dict__, "cells": len(archs), "train": len(train), "test": len(test),
               "min_clock_mhz": args.min_clock_mhz, "calibrated_model": model.to_dict(), "results": results,
               "timing": timing}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "predictor_nb201_b256_cudagraph.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
