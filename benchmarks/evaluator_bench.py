"""Evaluator benchmarks: ResNet-50 across modes, repeatability, throughput, counters vs FLOP utilization,
out-of-memory handling. Writes JSON/CSV files into --out.

    python benchmarks/evaluator_bench.py resnet50 repeatability oom --out benchmarks/results
    python benchmarks/evaluator_bench.py throughput correlation --out benchmarks/results

Each part can run alone; `--smoke` shrinks every part for a quick check on a CPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from nasutil import get_space
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig, Measurement

TORCHVISION_10 = ("resnet18", "resnet50", "wide_resnet50_2", "vgg16", "densenet121", "mobilenet_v2",
                  "mobilenet_v3_large", "efficientnet_b0", "shufflenet_v2_x1_0", "regnet_y_400mf")


def _write_jsonl(path: Path, rows: list[Measurement]) -> None:
    with path.open("w") as fh:
        for m in rows:
            fh.write(m.to_json() + "\n")


def _write_csv(path: Path, rows: list[Measurement]) -> None:
    flat = [m.to_row() for m in rows]
    keys = list(dict.fromkeys(k for row in flat for k in row))
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(flat)


def _cells(n: int, seed: int) -> list[Candidate]:
    space = get_space("nb201")
    rng = np.random.default_rng(seed)
    seen: dict[str, None] = {}
    while len(seen) < n:
        seen[space.sample(rng).to_string()] = None
    return [Candidate("nb201", a) for a in seen]


def part_resnet50(args, base: MeasureConfig) -> dict:
    rows = []
    batches = (1, 16, 128) if not args.smoke else (1,)
    modes = ("eager", "cudagraph", "compile") if base.device != "cpu" else ("eager", "compile")
    base = base.with_(num_classes=1000)
    with Evaluator(base, isolate=True, timeout_s=900) as ev:
        for batch in batches:
            for mode in modes:
                m = ev.measure(Candidate.model("torchvision:resnet50"), base.with_(batch_size=batch, mode=mode))
                print(f"resnet50 b{batch} {mode}: {m.latency_ms} ms util {m.utilization} {m.error or ''}",
                      flush=True)
                rows.append(m)
        layered = ev.measure(Candidate.model("torchvision:resnet50"),
                             base.with_(batch_size=batches[-1], mode="eager", per_layer=True))
    _write_csv(args.out / "resnet50_modes.csv", rows)
    (args.out / "resnet50_layers.json").write_text(json.dumps(layered.to_dict(), indent=1))
    return {"resnet50": [m.to_row() for m in rows]}


def part_repeatability(args, base: MeasureConfig) -> dict:
    cells = _cells(5 if args.smoke else 50, seed=1)
    config = _fast(base) if args.fast else base.with_(counters=False)
    runs = []
    for _ in range(2):
        with Evaluator(config, isolate=True, workers=args.workers) as ev:
            runs.append(list(ev.measure_many(cells)))
    diffs = [abs(a.latency_ms - b.latency_ms) / a.latency_ms for a, b in zip(*runs) if a.ok and b.ok]
    _write_csv(args.out / f"repeatability{args.tag}.csv", runs[0] + runs[1])
    summary = {"cells": len(cells), "pairs": len(diffs), "workers": args.workers, "config": config.to_dict(),
               "median_rel_diff": statistics.median(diffs), "p90_rel_diff": float(np.quantile(diffs, 0.9)),
               "max_rel_diff": max(diffs), "median_cv": statistics.median(m.latency_cv for m in runs[0] if m.ok),
               "noisy": sum(m.noisy for r in runs for m in r)}
    print("repeatability", summary, flush=True)
    return {"repeatability": summary}


def _fast(base: MeasureConfig) -> MeasureConfig:
    """The survey configuration: fewer, shorter windows, no counters."""
    return base.with_(counters=False, warmup=2, repeats=5, min_window_ms=2.0)


def part_throughput(args, base: MeasureConfig) -> dict:
    n = 10 if args.smoke else args.throughput_cells
    cells = _cells(n, seed=2)
    config = _fast(base) if args.fast else base.with_(counters=False)
    t_start = time.perf_counter()
    with Evaluator(config, isolate=True, workers=args.workers) as ev:
        t_worker = time.perf_counter()
        ev.info
        startup = time.perf_counter() - t_worker
        t0 = time.perf_counter()
        rows = list(ev.measure_many(cells))
        elapsed = time.perf_counter() - t0
    phases = {}
    for key in ("build_s", "count_s", "cast_s", "to_device_s", "prepare_s", "time_s"):
        values = [m.timing.get(key) for m in rows if m.ok and m.timing.get(key) is not None]
        phases[key] = statistics.fmean(values) if values else None
    per_cell = elapsed / len(rows)
    accounted = sum(v for v in phases.values() if v)
    summary = {"cells": len(rows), "failed": sum(not m.ok for m in rows), "workers": args.workers,
               "config": config.to_dict(), "worker_start_s": startup,
               "elapsed_s": elapsed, "cells_per_minute": 60 * len(rows) / elapsed, "per_cell_s": per_cell,
               "mean_phase_s": phases, "other_s": per_cell - accounted,
               "exclusive_s_per_cell": sum(phases[k] or 0 for k in ("to_device_s", "prepare_s", "time_s")),
               "projected_all_15625_min": 15625 * per_cell / 60, "total_s": time.perf_counter() - t_start}
    _write_csv(args.out / f"throughput{args.tag}.csv", rows)
    print("throughput", summary, flush=True)
    return {"throughput": summary}


def part_correlation(args, base: MeasureConfig) -> dict:
    cells = _cells(10 if args.smoke else 200, seed=3)
    models = [Candidate.model(f"torchvision:{n}") for n in (TORCHVISION_10[:2] if args.smoke else TORCHVISION_10)]
    with Evaluator(base, isolate=True) as ev:
        cell_rows = list(ev.measure_many(cells))
    with Evaluator(base.with_(input_size=None, num_classes=1000), isolate=True) as ev:
        model_rows = list(ev.measure_many(models))
    rows = cell_rows + model_rows
    _write_csv(args.out / "counters_vs_utilization.csv", rows)
    ok = [m for m in rows if m.ok]
    summary: dict = {"nb201_cells": sum(m.ok for m in cell_rows), "torchvision_models": sum(m.ok for m in model_rows)}
    util = np.array([m.utilization for m in ok])
    for key in ("sm_activity", "sm_occupancy", "tensor_activity", "dram_bw_util", "nvml_gpu_util"):
        values = [m.counters.get(key) for m in ok]
        if any(v is None for v in values) or len(values) < 3:
            summary[key] = None
            continue
        v = np.array(values, dtype=float)
        from scipy.stats import pearsonr, spearmanr

        summary[key] = {"pearson": float(pearsonr(util, v)[0]) if v.std() > 0 else None,
                        "spearman": float(spearmanr(util, v)[0]) if v.std() > 0 else None,
                        "min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}
    summary["utilization"] = {"min": float(util.min()), "median": float(np.median(util)), "max": float(util.max())}
    print("correlation", json.dumps(summary), flush=True)
    try:
        _plot_correlation(ok, args.out / "counters_vs_utilization.png")
    except ImportError:
        pass
    return {"correlation": summary}


def _plot_correlation(rows: list[Measurement], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in ("sm_activity", "tensor_activity", "sm_occupancy", "dram_bw_util")
            if all(m.counters.get(k) is not None for m in rows)]
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for space, color, label in (("nb201", "tab:blue", "NAS-Bench-201 cells"), ("torchvision", "tab:red", "torchvision")):
            sel = [m for m in rows if m.space == space]
            ax.scatter([100 * m.utilization for m in sel], [m.counters[key] for m in sel], s=10 if space == "nb201" else 30,
                       c=color, alpha=0.6, label=label)
        for m in rows:
            if m.space == "torchvision":
                ax.annotate(m.arch, (100 * m.utilization, m.counters[key]), fontsize=6)
        ax.set_xlabel("FLOP utilization (% of datasheet peak)")
        ax.set_ylabel(f"GPM {key.replace('_', ' ')} (%)")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    device = rows[0].device_name
    fig.suptitle(f"{device}: hardware counters vs FLOP utilization ({rows[0].dtype}, batch {rows[0].batch_size}, {rows[0].mode})")
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def part_oom(args, base: MeasureConfig) -> dict:
    cells = _cells(2, seed=4)
    huge = base.with_(batch_size=1 << 20, mode="eager", counters=False, input_size=None, num_classes=1000)
    with Evaluator(base, isolate=True) as ev:
        first = ev.measure(cells[0])
        oom = ev.measure(Candidate.model("torchvision:vgg16"), huge)
        last = ev.measure(cells[1])
    summary = {"statuses": [first.status, oom.status, last.status], "oom_error": oom.error}
    print("oom", summary, flush=True)
    return {"oom": summary}


PARTS = {"resnet50": part_resnet50, "repeatability": part_repeatability, "throughput": part_throughput,
         "correlation": part_correlation, "oom": part_oom}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="+", choices=sorted(PARTS))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--throughput-cells", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (throughput, repeatability)")
    parser.add_argument("--fast", action="store_true", help="survey timing config (throughput, repeatability)")
    parser.add_argument("--tag", default="", help="suffix for the summary keys of this run")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    on_gpu = args.device != "cpu"
    base = MeasureConfig(device=args.device, dtype="fp16" if on_gpu else "fp32", batch_size=256 if on_gpu else 2,
                         mode="cudagraph" if on_gpu else "eager", repeats=7)
    summary_path = args.out / "evaluator_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for part in args.parts:
        t0 = time.perf_counter()
        summary.update({k + args.tag: v for k, v in PARTS[part](args, base).items()})
        summary.setdefault("seconds", {})[part + args.tag] = time.perf_counter() - t0
        summary_path.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
