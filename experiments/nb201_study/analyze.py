"""Turn the NAS-Bench-201 measurements into the study: every cell's utilization and throughput, plots, summary.

    python experiments/nb201_study/analyze.py [--results experiments/nb201_study/results]

Measured cells keep their measured latency (the median over runs). The rest get the operator-level
prediction, and the prediction's error is reported against measured cells it never saw:
  batch 256      the shipped `h200` profile as it is (its overlap constants were fitted on the cells
                 in benchmarks/results/h200, which are left out of the error)
  saturating     the operator table timed at that batch (profile_saturated.json), overlap constants
                 fitted on the first half of the measured cells (in measuring order), error on the rest
Writes cells.csv (all 15,625 cells), summary.json and the plots into the results folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from nasutil.errors import fail
from nasutil.pareto import front_mask_2d

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ACCURACY = ("cifar10_test_200ep", "cifar100_test_200ep", "imagenet16_120_test_200ep")
THRESHOLD_QUANTILES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
FULL_PASS = "measured_all_b256.csv"  # every cell, one pass, `MeasureConfig.fast` settings


# ---------------------------------------------------------------- measuring and predicting (needs nasutil)

def b256_files(results: Path) -> list[Path]:
    """The batch-256 measurements: the sampled runs, and the pass over every cell where there is one."""
    return [path for path in (results / "measured_b256.csv", results / FULL_PASS) if path.is_file()]


def measured_medians(paths: list[Path], batch: int) -> tuple[dict[str, float], list[str], float]:
    """arch -> median latency (ms) at full clock, archs in measuring order, and the peak TFLOP/s used."""
    from nasutil.predictor.training_data import median_latencies, read_measurements

    rows = read_measurements(paths)
    medians = median_latencies(rows).get(("nb201", "fp16", batch, "cudagraph"), {})
    order = list(dict.fromkeys(r["arch"] for r in rows if r["arch"] in medians))
    peaks = {float(r["peak_tflops"]) for r in rows if r.get("peak_tflops")}
    if len(peaks) != 1:
        fail(f"error: expected one peak figure in {', '.join(map(str, paths))}, found {sorted(peaks)}")
    return medians, order, peaks.pop()


def predicted_b256(archs: list[str]) -> tuple[list[float], set[str]]:
    """Operator-level latencies from the shipped profile, and the cells its constants were fitted on."""
    from nasutil.predictor import make_predictor
    from nasutil.predictor.training_data import median_latencies, read_measurements

    fitted_on = set(median_latencies(read_measurements([REPO / "benchmarks/results/h200"]))
                    .get(("nb201", "fp16", 256, "cudagraph"), {}))
    predictor = make_predictor("operators", profile="h200")
    predictions = predictor.predict_many("nb201", archs, predictor.target("fp16", 256, "cudagraph"))
    return [p.latency_ms for p in predictions], fitted_on


def predicted_saturated(results: Path, archs: list[str], batch: int, fit_cells: list[str]) -> list[float]:
    """Operator-level latencies at the saturating batch, overlap constants fitted on `fit_cells`."""
    from nasutil.predictor import load_profile, make_predictor
    from nasutil.predictor.fit import fit_profile
    from nasutil.predictor.training_data import read_measurements

    fit = set(fit_cells)
    rows = [r for r in read_measurements([results / "measured_saturated.csv"]) if r["arch"] in fit]
    profile = fit_profile(rows, base=load_profile(str(results / "profile_saturated.json")), min_rows=len(rows) + 1)
    predictor = make_predictor("operators", profile=profile)
    predictions = predictor.predict_many("nb201", archs, predictor.target("fp16", batch, "cudagraph"))
    return [p.latency_ms for p in predictions]


def cell_costs(archs: list[str]) -> tuple[list[int], list[int]]:
    """FLOPs per image and parameters of each cell, from its direct op listing."""
    from nasutil import get_space
    from nasutil.ops import network_flops, network_params

    space = get_space("nb201")
    ops = [space.operators(space.parse(a)) for a in archs]
    return [network_flops(o) for o in ops], [network_params(o) for o in ops]


def build_cells(results: Path) -> list[dict]:
    """One row per cell: costs, accuracy, and measured/predicted latency at both batch sizes."""
    from nasutil.data.nasbench201 import accuracy_table

    table = accuracy_table()
    archs = sorted(table)
    batch = saturating_batch(results)
    m256, _, peak = measured_medians(b256_files(results), 256)
    msat, sat_order, _ = measured_medians([results / "measured_saturated.csv"], batch)
    flops, params = cell_costs(archs)
    p256, fitted_on = predicted_b256(archs)
    fit_cells = sat_order[: len(sat_order) // 2]
    psat = predicted_saturated(results, archs, batch, fit_cells)
    excluded = {256: fitted_on, batch: set(fit_cells)}
    rows = []
    for i, arch in enumerate(archs):
        row = {"arch": arch, "flops_per_image": flops[i], "params": params[i]}
        row.update({k: table[arch].get(k) for k in ACCURACY})
        for b, measured, predicted in ((256, m256, p256[i]), (batch, msat, psat[i])):
            latency = measured.get(arch)
            row[f"measured_ms_b{b}"] = _sig(latency) if latency is not None else ""
            row[f"predicted_ms_b{b}"] = _sig(predicted)
            row[f"heldout_b{b}"] = int(latency is not None and arch not in excluded[b])
            used = latency if latency is not None else predicted
            row[f"throughput_b{b}"] = _sig(b / (used * 1e-3))
            row[f"utilization_b{b}"] = _sig(flops[i] * b / (used * 1e-3) / (peak * 1e12))
        rows.append(row)
    return rows


def _sig(value: float, digits: int = 6) -> float:
    return float(f"{value:.{digits}g}")


# ---------------------------------------------------------------- reading the results (numpy only)

def saturating_batch(results: Path) -> int:
    return int(json.loads((results / "saturation.json").read_text())["saturating_batch"])


def read_cells(results: Path) -> dict[str, np.ndarray]:
    """cells.csv as columns; empty cells become NaN."""
    with (results / "cells.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    columns = {"arch": np.array([r["arch"] for r in rows])}
    for key in rows[0]:
        if key != "arch":
            columns[key] = np.array([float(r[key]) if r[key] != "" else np.nan for r in rows])
    return columns


def prediction_error(cells: dict[str, np.ndarray], batch: int) -> dict[str, float]:
    held = cells[f"heldout_b{batch}"] == 1
    measured, predicted = cells[f"measured_ms_b{batch}"][held], cells[f"predicted_ms_b{batch}"][held]
    error = np.abs(predicted / measured - 1)
    return {"cells": int(held.sum()), "mape": float(error.mean()), "within_10pct": float((error <= 0.10).mean()),
            "max": float(error.max()), "kendall_tau": _kendall(predicted, measured)}


def _kendall(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau(a, b)[0])


def thresholds(cells: dict[str, np.ndarray], batch: int) -> list[dict]:
    """For utilization thresholds at quantiles of the space: share removed and Pareto cells kept."""
    util, acc = cells[f"utilization_b{batch}"], cells["cifar10_test_200ep"]
    front = front_mask_2d(acc, cells[f"throughput_b{batch}"])
    out = []
    for q in THRESHOLD_QUANTILES:
        t = float(np.quantile(util, q)) if q else 0.0
        kept, dropped = util >= t, front & (util < t)
        out.append({"quantile": q, "threshold": t, "removed": float(1 - kept.mean()),
                    "pareto_kept": int((front & kept).sum()), "pareto_total": int(front.sum()),
                    "dropped_max_accuracy": float(acc[dropped].max()) if dropped.any() else None})
    return out


def conv_time_share(cells: dict[str, np.ndarray]) -> float:
    """Mean share of convolutions in a measured cell's summed op times at batch 256 (shipped op table)."""
    from nasutil import get_space
    from nasutil.predictor import PredictTarget, open_profile

    profile = open_profile("h200")
    table = profile.op_model.tables[PredictTarget(profile.device_name, "fp16", 256, "cudagraph").key]
    space = get_space("nb201")
    shares = []
    for arch in cells["arch"][~np.isnan(cells["measured_ms_b256"])]:
        times = [(op.family, table.times_us[op]) for op in space.operators(space.parse(str(arch)))
                 if op in table.times_us]
        shares.append(sum(t for f, t in times if f == "conv") / sum(t for _, t in times))
    return float(np.mean(shares))


def summarize(results: Path, cells: dict[str, np.ndarray] | None = None) -> dict:
    cells = read_cells(results) if cells is None else cells
    batch = saturating_batch(results)
    summary: dict = {"cells": len(cells["arch"]), "saturating_batch": batch, "batches": {}}
    acc = cells["cifar10_test_200ep"]
    for b in (256, batch):
        util, thr = cells[f"utilization_b{b}"], cells[f"throughput_b{b}"]
        measured = ~np.isnan(cells[f"measured_ms_b{b}"])
        front = front_mask_2d(acc, thr)
        top = int(np.argmax(acc))
        summary["batches"][str(b)] = {
            "measured_cells": int(measured.sum()),
            "utilization": {"min": float(util.min()), "median": float(np.median(util)), "max": float(util.max()),
                            "p10": float(np.quantile(util, 0.1)), "p90": float(np.quantile(util, 0.9))},
            "measured_utilization_max": float(util[measured].max()),
            "throughput": {"min": float(thr.min()), "median": float(np.median(thr)), "max": float(thr.max())},
            "prediction_error": prediction_error(cells, b),
            "spearman_util_accuracy": _spearman(util, acc),
            "pareto_cells": int(front.sum()),
            "pareto_measured": int((front & measured).sum()),
            "most_accurate": {"arch": str(cells["arch"][top]), "accuracy": float(acc[top]),
                              "utilization": float(util[top]), "throughput": float(thr[top])},
            "thresholds": thresholds(cells, b),
        }
    ratio = cells[f"throughput_b{batch}"] / cells["throughput_b256"]
    summary["throughput_gain_saturating_over_256"] = {"median": float(np.median(ratio)), "min": float(ratio.min()),
                                                     "max": float(ratio.max())}
    summary["repeat_runs_b256"] = repeatability(results / "measured_b256.csv")
    if (results / FULL_PASS).is_file():
        summary["full_pass_b256"] = full_pass(results)
    return summary


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b)[0])


def repeatability(path: Path) -> dict[str, float]:
    """Cells measured in two separate runs: the relative difference of their latencies."""
    latencies: dict[str, list[float]] = {}
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["status"] == "ok":
                latencies.setdefault(r["arch"], []).append(float(r["latency_ms"]))
    pairs = np.array([abs(v[1] / v[0] - 1) for v in latencies.values() if len(v) >= 2])
    return {"cells": int(len(pairs)), "median": float(np.median(pairs)) if len(pairs) else float("nan"),
            "p95": float(np.quantile(pairs, 0.95)) if len(pairs) else float("nan")}


def _ok_latencies(path: Path) -> dict[str, list[tuple[float, float]]]:
    """arch -> [(latency ms, SM clock MHz)] of the successful rows, in file order."""
    out: dict[str, list[tuple[float, float]]] = {}
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["status"] == "ok":
                out.setdefault(r["arch"], []).append((float(r["latency_ms"]), float(r["sm_clock_mhz"] or 0)))
    return out


def full_pass(results: Path) -> dict:
    """The pass over every cell: its rate, and its latencies against the earlier runs' medians (cells
    measured in both, every reading at a steady clock)."""
    runs = json.loads((results / "all_b256_runs.json").read_text())
    cells, seconds = sum(r["cells"] for r in runs), sum(r["seconds"] for r in runs)
    new, old = _ok_latencies(results / FULL_PASS), _ok_latencies(results / "measured_b256.csv")
    floor = 0.95 * max(c for rows in (*new.values(), *old.values()) for _, c in rows)
    diffs = []
    for arch, rows in old.items():
        steady = [ms for ms, clock in rows if clock >= floor]
        if arch in new and steady and new[arch][0][1] >= floor:
            diffs.append(new[arch][0][0] / float(np.median(steady)) - 1)
    diffs = np.abs(np.array(diffs))
    return {"cells": cells, "seconds": seconds, "cells_per_s": cells / seconds, "runs": len(runs),
            "failed": sum(r["failed"] for r in runs), "workers": runs[0]["workers"],
            "against_earlier_runs": {"cells": int(len(diffs)), "median": float(np.median(diffs)),
                                     "p90": float(np.quantile(diffs, 0.9)), "max": float(diffs.max())}}


def headline(results: Path) -> dict[str, str]:
    """The numbers the README quotes, formatted as it quotes them, computed from the committed CSVs."""
    cells = read_cells(results)
    s = summarize(results, cells)
    batch = s["saturating_batch"]
    b256, bsat = s["batches"]["256"], s["batches"][str(batch)]
    e256, esat = b256["prediction_error"], bsat["prediction_error"]
    half = next(t for t in b256["thresholds"] if t["quantile"] == 0.5)
    safe = max((t for t in b256["thresholds"] if t["pareto_kept"] == t["pareto_total"]), key=lambda t: t["quantile"])
    high = next(t for t in b256["thresholds"] if t["quantile"] == 0.7)
    return {
        "saturating_batch": f"batch {batch}",
        "threshold_70_256": f"{100 * high['threshold']:.2f}% removes {100 * high['removed']:.0f}% of the space and "
                            f"keeps {high['pareto_kept']} of the {high['pareto_total']} Pareto-optimal cells; the "
                            f"{high['pareto_total'] - high['pareto_kept']} it drops have at most "
                            f"{high['dropped_max_accuracy']:.2f}% accuracy",
        "conv_share_256": f"{100 * conv_time_share(cells):.0f}%",
        "pareto_measured_256": f"{b256['pareto_measured']} of the {b256['pareto_cells']} Pareto-optimal cells",
        "measured_256": f"{b256['measured_cells']:,} cells",
        "measured_sat": f"{bsat['measured_cells']:,} cells",
        "util_median_256": f"{100 * b256['utilization']['median']:.2f}%",
        "util_max_256": f"{100 * b256['utilization']['max']:.2f}%",
        "util_median_sat": f"{100 * bsat['utilization']['median']:.2f}%",
        "util_max_sat": f"{100 * bsat['utilization']['max']:.2f}%",
        "gain_sat": f"{s['throughput_gain_saturating_over_256']['median']:.2f}x",
        "error_256": f"MAPE {100 * e256['mape']:.1f}%, {100 * e256['within_10pct']:.1f}% within ±10%, "
                     f"worst {100 * e256['max']:.1f}% ({e256['cells']:,} cells)",
        "error_sat": f"MAPE {100 * esat['mape']:.1f}%, {100 * esat['within_10pct']:.1f}% within ±10%, "
                     f"worst {100 * esat['max']:.1f}% ({esat['cells']:,} cells)",
        "repeat": f"{100 * s['repeat_runs_b256']['median']:.2f}%",
        "full_pass": f"{s['full_pass_b256']['cells']:,} cells in {s['full_pass_b256']['seconds'] / 60:.1f} minutes "
                     f"({s['full_pass_b256']['cells_per_s']:.1f} cells/s, {s['full_pass_b256']['workers']} workers)",
        "full_vs_earlier": f"{s['full_pass_b256']['against_earlier_runs']['cells']:,} cells measured in both differ by "
                           f"a median of {100 * s['full_pass_b256']['against_earlier_runs']['median']:.2f}% "
                           f"(90th percentile {100 * s['full_pass_b256']['against_earlier_runs']['p90']:.2f}%)",
        "spearman_256": f"{b256['spearman_util_accuracy']:.2f}",
        "pareto_256": f"{b256['pareto_cells']} Pareto-optimal cells",
        "safe_threshold_256": f"{100 * safe['threshold']:.2f}% utilization removes {100 * safe['removed']:.0f}% "
                              f"of the space and keeps all {safe['pareto_total']}",
        "measured_util_max_256": f"{100 * b256['measured_utilization_max']:.2f}%",
        "median_threshold_256": f"removes {100 * half['removed']:.0f}% of the space and keeps "
                                f"{half['pareto_kept']} of the {half['pareto_total']}",
        "most_accurate": f"{b256['most_accurate']['accuracy']:.2f}%",
        "most_accurate_util": f"{100 * b256['most_accurate']['utilization']:.2f}%",
    }


def threshold_table(results: Path) -> str:
    """The README's markdown table of utilization thresholds at both batch sizes."""
    cells = read_cells(results)
    batch = saturating_batch(results)
    lines = [f"| threshold quantile | batch 256: threshold | removed | Pareto cells kept | batch {batch}: threshold "
             "| removed | Pareto cells kept |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for a, b in zip(thresholds(cells, 256), thresholds(cells, batch)):
        lines.append(f"| {a['quantile']:.1f} | {100 * a['threshold']:.2f}% | {100 * a['removed']:.0f}% | "
                     f"{a['pareto_kept']}/{a['pareto_total']} | {100 * b['threshold']:.2f}% | "
                     f"{100 * b['removed']:.0f}% | {b['pareto_kept']}/{b['pareto_total']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- plots

def plot_all(results: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = read_cells(results)
    batch = saturating_batch(results)
    batches = (256, batch)
    acc = cells["cifar10_test_200ep"]

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, b in zip(axes, batches):
        util = 100 * cells[f"utilization_b{b}"]
        measured = ~np.isnan(cells[f"measured_ms_b{b}"])
        bins = np.linspace(0, util.max() * 1.02, 60)
        ax.hist(util, bins=bins, color="tab:blue", alpha=0.6, label=f"all {len(util):,} cells")
        ax.hist(util[measured], bins=bins, color="tab:orange", histtype="step", lw=1.5,
                label=f"measured ({measured.sum():,})")
        ax.axvline(np.median(util), color="k", ls="--", lw=1, label=f"median {np.median(util):.2f}%")
        ax.set(title=f"batch {b}, fp16, CUDA graph", xlabel="FLOP utilization of the H200 (%)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("cells")
    fig.suptitle("NAS-Bench-201: utilization across the search space")
    _save(fig, results / "util_distribution.png")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, b in zip(axes, batches):
        util = 100 * cells[f"utilization_b{b}"]
        sc = ax.scatter(util, acc, s=3, c=np.log10(cells["flops_per_image"]), cmap="viridis", alpha=0.6, lw=0)
        ax.set(title=f"batch {b}", xlabel="FLOP utilization (%)", ylim=(max(0, np.nanmin(acc) - 2), 96))
    axes[0].set_ylabel("CIFAR-10 test accuracy, 200 epochs (%)")
    fig.colorbar(sc, ax=axes, label="log10 FLOPs per image")
    fig.suptitle("Utilization against accuracy")
    _save(fig, results / "util_vs_accuracy.png")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, b in zip(axes, batches):
        thr = cells[f"throughput_b{b}"] / 1e3
        front = front_mask_2d(acc, cells[f"throughput_b{b}"])
        ax.scatter(thr, acc, s=3, c="0.6", alpha=0.5, lw=0, label="cells")
        order = np.argsort(thr[front])
        ax.plot(thr[front][order], acc[front][order], "o-", color="tab:red", ms=3, lw=1,
                label=f"Pareto front ({front.sum()} cells)")
        ax.set(title=f"batch {b}", xlabel="throughput (thousand images/s)", ylim=(80, 95))
        ax.legend(fontsize=8, loc="lower left")
    axes[0].set_ylabel("CIFAR-10 test accuracy, 200 epochs (%)")
    fig.suptitle("Throughput against accuracy on the H200 (cells under 80% not shown)")
    _save(fig, results / "throughput_vs_accuracy.png")

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for b, color in zip(batches, ("tab:blue", "tab:green")):
        rows = thresholds(cells, b)
        removed = [100 * r["removed"] for r in rows]
        kept = [r["pareto_kept"] / r["pareto_total"] * 100 for r in rows]
        ax.plot(removed, kept, "o-", color=color, label=f"batch {b} ({rows[0]['pareto_total']} Pareto cells)")
    ax.plot([0, 100], [100, 0], ":", color="0.5", label="threshold unrelated to the front")
    ax.set(xlabel="share of the space removed by a utilization threshold (%)",
           ylabel="Pareto-optimal cells kept (%)", title="What a utilization threshold costs the front")
    ax.legend(fontsize=8)
    _save(fig, results / "thresholds.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for ax, b in zip(axes, batches):
        held = cells[f"heldout_b{b}"] == 1
        measured, predicted = cells[f"measured_ms_b{b}"][held], cells[f"predicted_ms_b{b}"][held]
        ax.scatter(measured, predicted, s=3, alpha=0.5, lw=0)
        lo, hi = measured.min() * 0.95, measured.max() * 1.05
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.85", label="±10%")
        ax.set(title=f"batch {b}: {held.sum():,} held-out cells", xlabel="measured latency (ms)",
               ylabel="operator-level prediction (ms)")
        ax.legend(fontsize=8)
    fig.suptitle("Prediction against measurement for cells the predictor never saw")
    _save(fig, results / "prediction_error.png")

    plot_sweep(results, plt)


def plot_sweep(results: Path, plt) -> None:
    with (results / "sweep.csv").open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for arch in dict.fromkeys(r["arch"] for r in rows):
        points = [(int(r["batch_size"]), float(r["throughput_per_s"])) for r in rows if r["arch"] == arch]
        ax.plot(*zip(*points), "o-", ms=3, label=arch if len(arch) < 60 else arch[:57] + "...")
    ax.axvline(saturating_batch(results), color="k", ls="--", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="images/s",
           title="Batch sweeps: throughput levels off at the dashed batch")
    ax.legend(fontsize=5)
    _save(fig, results / "saturation.png")


def _save(fig, path: Path) -> None:
    fig.savefig(path, dpi=130, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)


def write_cells(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=HERE / "results")
    parser.add_argument("--plots-only", action="store_true", help="reuse cells.csv; redo summary and plots")
    args = parser.parse_args()
    needed = ["saturation.json", "sweep.csv", "measured_b256.csv", "measured_saturated.csv",
              "profile_saturated.json"] + (["cells.csv"] if args.plots_only else [])
    missing = [name for name in needed if not (args.results / name).is_file()]
    if missing:
        fail(f"error: {args.results} lacks {', '.join(missing)} (run measure.py on the GPU machine first)")
    if not args.plots_only:
        write_cells(args.results / "cells.csv", build_cells(args.results))
    (args.results / "summary.json").write_text(json.dumps(summarize(args.results), indent=1) + "\n")
    plot_all(args.results)
    for key, value in headline(args.results).items():
        print(f"{key:22s} {value}")
    print(threshold_table(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
