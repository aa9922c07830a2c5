"""Predictor accuracy against evaluator measurements on held-out candidates, per space and configuration.

    python benchmarks/predictor_bench.py --measurements benchmarks/results/h200 \
        --profile benchmarks/results/h200/h200_operators.json --out benchmarks/results/h200

Reads the measurements in `predictor_data_<space>.csv` (and, for nb201 at batch 256 cudagraph, the other
evaluator CSVs in the folder), keeps those taken at >= 95% of the highest SM clock of their group, takes
the median latency per arch, and holds out a seeded random subset of archs (--test-nb201, --test-mbconv)
that no predictor is fitted or calibrated on. Reports Kendall tau, Spearman rho, MAPE and the share
within +-10% of measured latency for every predictor and the FLOPs and parameter-count baselines; the
cost of a prediction on one CPU core against the cost of a measurement; and an active-learning run
(which candidates to measure next) against random choice at equal measurement budgets.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau, spearmanr

from nasutil import get_space
from nasutil.ops import network_flops, network_params
from nasutil.predictor import PredictTarget, load_profile
from nasutil.predictor.active import choose_next
from nasutil.predictor.analytical import RooflineModel, calibrate
from nasutil.predictor.features import operator_features
from nasutil.predictor.learned import LearnedLatencyModel
from nasutil.predictor.op_tables import OperatorTable, OpTableModel, fit_overlap
from nasutil.predictor.training_data import median_latencies, read_measurements

CONFIGS = ((256, "cudagraph"), (256, "eager"), (1, "cudagraph"), (1, "eager"))


def load(folder: Path, space: str) -> dict[tuple[int, str], dict[str, float]]:
    """(batch, mode) -> arch -> median fp16 latency, as `profile fit` reads them."""
    files = [folder / f"predictor_data_{space}.csv"]
    if space == "nb201":
        files += [p for p in sorted(folder.glob("*.csv")) if p.name.startswith(("throughput", "repeatability"))]
    groups = median_latencies(read_measurements(files))
    return {(batch, mode): v for (name, dtype, batch, mode), v in groups.items() if name == space and dtype == "fp16"}


def metrics(predicted: np.ndarray, measured: np.ndarray) -> dict:
    rel = np.abs(predicted - measured) / measured
    return {"kendall_tau": round(float(kendalltau(predicted, measured)[0]), 4),
            "spearman_rho": round(float(spearmanr(predicted, measured)[0]), 4),
            "mape": round(float(rel.mean()), 4), "within_10pct": round(float((rel <= 0.10).mean()), 4),
            "n": int(len(measured))}


def power_law(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    coef = np.polyfit(np.log(x_train), np.log(y_train), 1)
    return np.exp(np.polyval(coef, np.log(x_test)))


def evaluate(space_name: str, batch: int, mode: str, latencies: dict[str, float], n_test: int, device: str,
             tables: list[OperatorTable], seed: int) -> tuple[dict, dict]:
    space = get_space(space_name)
    target = PredictTarget(device, "fp16", batch, mode)
    archs = sorted(latencies)
    np.random.default_rng(seed).shuffle(archs)
    test, train = archs[:n_test], archs[n_test:]
    ops = {a: space.operators(space.parse(a)) for a in archs}
    enc = {a: space.parse(a).encode() for a in archs}
    y_train = np.array([latencies[a] for a in train])
    y_test = np.array([latencies[a] for a in test])
    results: dict[str, dict] = {}
    predictions: dict[str, np.ndarray] = {}

    def record(name: str, predicted) -> None:
        predictions[name] = np.asarray(predicted, dtype=np.float64)
        results[name] = metrics(predictions[name], y_test)

    for name, feature in (("flops_baseline", network_flops), ("params_baseline", network_params)):
        record(name, power_law(np.array([feature(ops[a]) for a in train]), y_train,
                               np.array([feature(ops[a]) for a in test])))
    record("analytical_default", [RooflineModel().predict_latency_ms(ops[a], target) for a in test])
    fixed = ("launch_us",) if mode == "cudagraph" else ("graph_gap_us",)
    kernel_model = calibrate([(ops[a], target, latencies[a]) for a in train[:200]], fixed=fixed)
    analytical = RooflineModel(kernel_model)
    record("analytical_calibrated", [analytical.predict_latency_ms(ops[a], target) for a in test])

    table = next(t for t in tables if (t.batch_size, t.mode) == (batch, mode))
    plain = OperatorTable(table.dtype, table.batch_size, table.mode, table.times_us)
    operators = OpTableModel([plain])
    record("operators_sum", [operators.predict_latency_ms(ops[a], target) for a in test])
    fit_overlap(plain, operators, target, [(ops[a], latencies[a]) for a in train])
    record("operators", [operators.predict_latency_ms(ops[a], target) for a in test])
    overlap = {"scale": plain.shared.scale, "per_op_us": plain.shared.per_op_us, "offset_us": plain.shared.offset_us}

    def features(a: str) -> np.ndarray:
        return np.concatenate([enc[a], operator_features(ops[a], target, analytical, operators)])

    x = {a: features(a) for a in archs}
    learned = LearnedLatencyModel().fit(np.array([x[a] for a in train]), y_train)
    record("learned", learned.predict_ms(np.array([x[a] for a in test])))
    only_encoding = LearnedLatencyModel().fit(np.array([enc[a] for a in train]), y_train)
    record("learned_encoding_only", only_encoding.predict_ms(np.array([enc[a] for a in test])))

    # cost of a prediction on one core: list the ops, compute features, predict (learned: one batch)
    sample = test[: min(100, len(test))]
    cost = {}
    for name, fn in (
            ("operators", lambda batch: [operators.predict_latency_ms(space.operators(space.parse(a)), target)
                                         for a in batch]),
            ("analytical", lambda batch: [analytical.predict_latency_ms(space.operators(space.parse(a)), target)
                                          for a in batch]),
            ("learned", lambda batch: learned.predict_ms(np.array([
                np.concatenate([space.parse(a).encode(),
                                operator_features(space.operators(space.parse(a)), target, analytical, operators)])
                for a in batch])))):
        fn(sample[:2])
        t0 = time.perf_counter()
        fn(sample)
        cost[f"{name}_ms_per_candidate"] = round((time.perf_counter() - t0) * 1e3 / len(sample), 3)

    best = max(("learned", "operators", "analytical_calibrated"), key=lambda k: results[k]["kendall_tau"])
    summary = {"space": space_name, "batch_size": batch, "mode": mode, "archs": len(archs), "train": len(train),
               "test": len(test), "results": results, "operators_overlap": overlap,
               "analytical_calibrated_model": kernel_model.to_dict(), "prediction_cost": cost, "best": best}
    scatter = {"measured": y_test.tolist(), **{k: predictions[k].tolist() for k in ("learned", "operators",
                                                                                    "flops_baseline")}}
    return summary, scatter


def active_learning(space_name: str, latencies: dict[str, float], n_test: int, device: str, tables, seed: int,
                    budgets: tuple[int, ...]) -> dict:
    """Measure-next by ensemble disagreement against random choice, equal budgets, same held-out test."""
    space = get_space(space_name)
    target = PredictTarget(device, "fp16", 256, "cudagraph")
    archs = sorted(latencies)
    np.random.default_rng(seed).shuffle(archs)
    test, pool = archs[:n_test], archs[n_test:]
    table = next(t for t in tables if (t.batch_size, t.mode) == (256, "cudagraph"))
    operators = OpTableModel([table])
    analytical = RooflineModel()
    x = {a: np.concatenate([space.parse(a).encode(),
                            operator_features(space.operators(space.parse(a)), target, analytical, operators)])
         for a in archs}
    y = {a: latencies[a] for a in archs}
    x_test, y_test = np.array([x[a] for a in test]), np.array([y[a] for a in test])
    out = {}
    for strategy in ("random", "active"):
        rng = np.random.default_rng(seed + 1)
        chosen = list(rng.choice(pool, size=budgets[0], replace=False))
        curve = []
        for budget in budgets:
            while len(chosen) < budget:
                rest = [a for a in pool if a not in set(chosen)]
                step = min(budget - len(chosen), max(10, budget // 4))
                if strategy == "random":
                    chosen += list(rng.choice(rest, size=step, replace=False))
                else:
                    picks = choose_next(np.array([x[a] for a in chosen]), np.array([y[a] for a in chosen]),
                                        np.array([x[a] for a in rest]), step, seed=int(rng.integers(1 << 31)))
                    chosen += [rest[i] for i in picks]
            model = LearnedLatencyModel().fit(np.array([x[a] for a in chosen]), np.array([y[a] for a in chosen]))
            curve.append({"measured": budget, **metrics(model.predict_ms(x_test), y_test)})
        out[strategy] = curve
    return out


def plot(scatters: dict, active: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(scatters)
    fig, axes = plt.subplots(2, (len(keys) + 1) // 2 + 1, figsize=(4.2 * ((len(keys) + 1) // 2 + 1), 8))
    axes = axes.ravel()
    for ax, key in zip(axes, keys):
        data = scatters[key]
        m = np.array(data["measured"])
        for name, style in (("flops_baseline", "x"), ("operators", "s"), ("learned", "o")):
            ax.scatter(m, data[name], s=7, marker=style, alpha=0.5, label=name)
        lo, hi = m.min() * 0.8, m.max() * 1.2
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.2)
        ax.set(xscale="log", yscale="log", title=key, xlabel="measured ms", ylabel="predicted ms")
    axes[0].legend(fontsize=7)
    for ax, (space, curves) in zip(axes[len(keys):], active.items()):
        for strategy, curve in curves.items():
            ax.plot([c["measured"] for c in curve], [c["within_10pct"] for c in curve], marker="o", label=strategy)
        ax.set(title=f"{space} b256 cudagraph: measure-next", xlabel="networks measured",
               ylabel="held-out share within 10%")
        ax.legend()
    for ax in axes[len(keys) + len(active):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measurements", type=Path, required=True)
    parser.add_argument("--profile", required=True, help="profile with the operator tables (from profile build)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--test-nb201", type=int, default=300)
    parser.add_argument("--test-mbconv", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    profile = load_profile(args.profile)
    summaries, scatters, active = [], {}, {}
    for space_name, n_test in (("nb201", args.test_nb201), ("mbconv", args.test_mbconv)):
        data = load(args.measurements, space_name)
        for batch, mode in CONFIGS:
            if (batch, mode) not in data:
                continue
            summary, scatter = evaluate(space_name, batch, mode, data[(batch, mode)], n_test, profile.device_name,
                                        profile.operators, args.seed)
            summaries.append(summary)
            scatters[f"{space_name} b{batch} {mode}"] = scatter
            print(json.dumps({k: summary[k] for k in ("space", "batch_size", "mode", "train", "test", "best")}
                             | {"best_result": summary["results"][summary["best"]]}), flush=True)
        budgets = (50, 100, 200, 400) if space_name == "nb201" else (30, 60, 90, 130)
        active[space_name] = active_learning(space_name, data[(256, "cudagraph")], n_test, profile.device_name,
                                             profile.operators, args.seed, budgets)
        print(json.dumps({space_name: active[space_name]}), flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "predictor_accuracy.json").write_text(json.dumps({"device": profile.device_name,
                                                                  "summaries": summaries, "active": active},
                                                                 indent=1))
    with (args.out / "predictor_accuracy.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["space", "batch_size", "mode", "train", "test", "predictor", "kendall_tau", "spearman_rho",
                         "mape", "within_10pct"])
        for s in summaries:
            for name, r in s["results"].items():
                writer.writerow([s["space"], s["batch_size"], s["mode"], s["train"], s["test"], name,
                                 r["kendall_tau"], r["spearman_rho"], r["mape"], r["within_10pct"]])
    plot(scatters, active, args.out / "predictor_accuracy.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
