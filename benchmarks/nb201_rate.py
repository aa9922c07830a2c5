"""How fast the evaluator measures NAS-Bench-201 cells, where the time goes, and whether the fast path
repeats and agrees with the default path and with a plain timing loop.

    python benchmarks/nb201_rate.py --out benchmarks/results/h200

Passes, all fp16, batch 256, CUDA graph, channels_last, no counters, in one process tree:
  fast       `MeasureConfig.fast()` with --workers workers on --cells cells (the rate)
  default    the default timing (3 warm-ups, 7 windows of >= 5 ms, eager warm-up before every capture),
             with which the study measured its first 4,540 cells
  fast again the first --repeat-cells cells once more with the fast path (run-to-run repeatability)
  fast, cold workers  with --cold-pass, the same cells with workers that do not load their CUDA libraries as
             they start (`Evaluator(warm=False)`): workers started so before 71fb8bf
  fast, timing turn  with --mps, the --cells cells fast with `device_turn="timing"`: each worker copies and
             captures outside its turn, which holds the timing alone. Every pass then runs under CUDA MPS
             (`nasutil.evaluator.mps`, started before anything touches the device): the workers share one
             context on the device, so a copy or capture beside another worker's timing switches no contexts.
             Before the daemon starts, a fresh process times the --reference-cells cells with the plain loop
             without MPS ("reference without MPS"), so that the readings under MPS can be set against the same
             cells timed without it on the same machine
  fast, SETTINGS  with --variant SETTINGS (e.g. repeats=4 or device_turn="whole"), the
             fast pass again with those `MeasureConfig` settings changed (with --mps: "fast, timing turn,
             SETTINGS", from the timing-turn pass): another way of timing set against the same cells
  reference  the first --reference-cells cells timed by a plain loop of CUDA-graph replays in this process
  reference, woken  the same loop with 50 ms of fp16 matrix products on the device right before each cell:
             whether the state another process's burst left an H200 in (BENCHMARKS.md, "Seed 96") closes
             the evaluator's gap to the plain loop (on an H100 it did not: "Seeds 97 and 98 on an H100")
Writes nb201_rate.json (summary) and nb201_rate.csv (one row per cell and pass).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from nasutil import get_space
from nasutil.errors import NasutilError
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig, Measurement
from nasutil.evaluator.mps import server_running, shared_device_context
from nasutil.evaluator.reference import graph_replay_ms

PHASES = ("build_s", "count_s", "cast_s", "allocate_s", "to_device_s", "prepare_s", "turn_wait_s", "time_s", "release_s",
          "turn_s")


def cells(n: int, seed: int) -> list[str]:
    space = get_space("nb201")
    every = [a.to_string() for a in space.enumerate()]
    return [every[i] for i in np.random.default_rng(seed).permutation(len(every))[:n]]


def run_pass(name: str, config: MeasureConfig, archs: list[str], workers: int,
             warm: bool = True, mps: bool = False) -> tuple[dict, list[Measurement]]:
    started = time.perf_counter()
    with Evaluator(config, workers=workers, timeout_s=120, warm=warm) as evaluator:
        evaluator.start()  # every worker up before the clock starts
        shared = server_running() if mps else None  # the workers reached the MPS server
        ready = time.perf_counter()
        results = list(evaluator.measure_many([Candidate("nb201", a) for a in archs]))
        done = time.perf_counter()
    ok = [m for m in results if m.ok]
    summary = {
        "pass": name, "workers": workers, "warm": warm, "mps_server": shared, "cells": len(archs),
        "failed": len(archs) - len(ok),
        "startup_s": round(ready - started, 2), "wall_s": round(done - ready, 2),
        "cells_per_s": round(len(archs) / (done - ready), 2),
        "projected_15625_min": round(15625 / (len(archs) / (done - ready)) / 60, 2),
        "mean_phase_ms": {p: round(1e3 * statistics.fmean(m.timing.get(p, 0.0) for m in ok), 2) for p in PHASES},
        "median_cv": statistics.median(m.latency_cv for m in ok),
        "retimed_for_cv": sum(bool(m.timing.get("remeasured")) for m in ok),
        "clock_retries": sum(m.timing.get("clock_retries", 0) for m in ok),
        "clocks_mhz": sorted({m.sm_clock_mhz for m in ok if m.sm_clock_mhz}),
    }
    print(json.dumps(summary), flush=True)
    return summary, results


def _burst(a: torch.Tensor, seconds: float = 0.05) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a @ a
        torch.cuda.synchronize()


def reference_ms(archs: list[str], woken: bool = False) -> dict[str, float]:
    """A plain loop: build in this process, cast, capture, replay back to back timed with CUDA events;
    `woken`: a burst of matrix products right before each cell's replays."""
    space = get_space("nb201")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    out = {}
    with torch.inference_mode():
        for arch in archs:
            model = space.build(space.parse(arch), num_classes=10).eval()
            model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
            x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(
                memory_format=torch.channels_last)
            if woken:
                _burst(a)
            out[arch] = graph_replay_ms(model, x, replays=20, windows=7)
    return out


def differences(a: dict[str, Measurement], b: dict[str, Measurement], floor: float) -> dict:
    """Relative latency differences of the cells both passes measured at a steady clock."""
    diffs = [abs(b[k].latency_ms / a[k].latency_ms - 1) for k in a.keys() & b.keys()
             if a[k].ok and b[k].ok and min(a[k].sm_clock_mhz or 0, b[k].sm_clock_mhz or 0) >= floor]
    ratios = [b[k].latency_ms / a[k].latency_ms for k in a.keys() & b.keys() if a[k].ok and b[k].ok]
    return {"cells": len(diffs), "median": statistics.median(diffs), "p90": float(np.quantile(diffs, 0.9)),
            "max": max(diffs), "median_ratio": statistics.median(ratios)}


def write(out: Path, info: dict, summaries: list[dict], agreement: dict, by_pass: dict[str, dict[str, Measurement]],
          references: dict[str, dict[str, float]]) -> None:
    """nb201_rate.json and .csv from what has run so far: written after every pass, so a call cut short
    keeps the passes it finished."""
    (out / "nb201_rate.json").write_text(json.dumps({"machine": info, "passes": summaries,
                                                      "agreement": agreement}, indent=1))
    with (out / "nb201_rate.csv").open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["pass", "arch", "status", "latency_ms", "latency_cv", "sm_clock_mhz", "clock_retries",
                         *PHASES])
        for name, results in by_pass.items():
            for m in results.values():
                writer.writerow([name, m.arch, m.status, m.latency_ms, m.latency_cv, m.sm_clock_mhz,
                                 m.timing.get("clock_retries", 0), *(m.timing.get(p, "") for p in PHASES)])
        for name, reference in references.items():
            for arch, ms in reference.items():
                writer.writerow([name, arch, "ok", ms, "", "", "", *([""] * len(PHASES))])


#: what every pass shares (the device, dtype, batch and mode): a variant changes how the network is timed
FIXED = ("device", "dtype", "batch_size", "mode", "channels_last", "input_size", "num_classes")


def variant(text: str) -> dict:
    """`repeats=4,min_window_ms=1.5` as MeasureConfig timing settings (values as JSON: numbers, true, false,
    "quoted text"), checked by MeasureConfig itself."""
    changes = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{item!r}: expected KEY=VALUE")
        if key in FIXED:
            raise argparse.ArgumentTypeError(f"{key}: every pass shares it; a variant changes how a network is timed")
        try:
            changes[key] = json.loads(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r}: the value must be a number, true, false or \"text\"") from None
    try:
        MeasureConfig(device="cpu", mode="eager").with_(**changes)
    except (TypeError, NasutilError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    return changes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeat-cells", type=int, default=300)
    parser.add_argument("--reference-cells", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--cold-pass", action="store_true",
                        help="also time the first --repeat-cells cells fast with workers started cold "
                             "(Evaluator(warm=False), as before workers warmed themselves)")
    parser.add_argument("--mps", action="store_true",
                        help="run every pass under CUDA MPS, and add the pass with the timing alone in the turn")
    parser.add_argument("--variant", action="append", default=[], type=variant, metavar="KEY=VALUE[,...]",
                        help="also run the fast pass (with --mps: the timing-turn pass) with these MeasureConfig "
                             "settings changed (repeatable)")
    parser.add_argument("--no-woken", action="store_true", help="leave out the woken reference")
    parser.add_argument("--reference-only", type=Path, default=None, metavar="JSON",
                        help="only time the --reference-cells cells with the plain loop and write them to JSON")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.reference_only is not None:
        args.reference_only.write_text(json.dumps(reference_ms(cells(args.cells, args.seed)[: args.reference_cells])))
        return 0
    if not args.mps:
        return measure(args)
    without = args.out / "reference_without_mps.json"  # a process of its own, before any context joins MPS
    subprocess.run([sys.executable, __file__, "--cells", str(args.cells), "--seed", str(args.seed),
                    "--reference-cells", str(args.reference_cells), "--reference-only", str(without),
                    "--out", str(args.out)], check=True)
    with shared_device_context():
        return measure(args, without=json.loads(without.read_text()))


def measure(args: argparse.Namespace, without: dict[str, float] | None = None) -> int:
    """Every pass, the plain loop's references (`without`: the plain loop's readings of a process without
    MPS, where these run under it), and their agreement, written to --out."""
    archs = cells(args.cells, args.seed)
    base = MeasureConfig(device="cuda", dtype="fp16", batch_size=256, mode="cudagraph", counters=False)
    fast = base.fast()
    passes = [("fast", fast, archs), ("default", base, archs[: args.repeat_cells]),
              ("fast again", fast, archs[: args.repeat_cells])]
    if args.mps:
        passes.insert(1, ("fast, timing turn", fast.with_(device_turn="timing"), archs))
    varied = fast.with_(device_turn="timing") if args.mps else fast
    variants = [(("fast, timing turn, " if args.mps else "fast, ") + ",".join(f"{k}={v}" for k, v in changes.items()),
                 varied.with_(**changes), archs) for changes in args.variant]
    passes[1 + args.mps:1 + args.mps] = variants
    info = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cpus": len(os.sched_getaffinity(0)), "mps": args.mps}
    if args.cold_pass:
        passes.append(("fast, cold workers", fast, archs[: args.repeat_cells]))
    summaries, by_pass = [], {}
    for name, config, part in passes:
        summary, results = run_pass(name, config, part, args.workers, warm=not name.endswith("cold workers"),
                                    mps=args.mps)
        summaries.append(summary)
        by_pass[name] = {m.arch: m for m in results}
        write(args.out, info, summaries, {}, by_pass, {})  # kept if a later pass is cut short

    references = {"reference": reference_ms(archs[: args.reference_cells])}
    if without is not None:
        references["reference without MPS"] = without
    if not args.no_woken:
        references["reference, woken"] = reference_ms(archs[: args.reference_cells], woken=True)
    clocks = [m.sm_clock_mhz for p in by_pass.values() for m in p.values() if m.ok and m.sm_clock_mhz]
    floor = 0.95 * max(clocks)

    def against_reference(name: str, reference: str = "reference") -> dict:
        ratios = [by_pass[name][a].latency_ms / r for a, r in references[reference].items()]
        return {"cells": len(ratios), "median": statistics.median(abs(x - 1) for x in ratios),
                "max": max(abs(x - 1) for x in ratios), "median_ratio": statistics.median(ratios)}

    agreement = {
        "fast vs fast again": differences(by_pass["fast"], by_pass["fast again"], floor),
        "default vs fast": differences(by_pass["default"], by_pass["fast"], floor),
        "reference vs fast": against_reference("fast"),
        "reference vs default": against_reference("default"),
    }
    if not args.no_woken:
        agreement["woken reference vs fast"] = against_reference("fast", "reference, woken")
        agreement["woken reference vs default"] = against_reference("default", "reference, woken")
    if args.mps:
        timing = "fast, timing turn"
        agreement["default vs " + timing] = differences(by_pass["default"], by_pass[timing], floor)
        agreement["fast vs " + timing] = differences(by_pass["fast"], by_pass[timing], floor)
        agreement["reference vs " + timing] = against_reference(timing)
        agreement["reference without MPS vs " + timing] = against_reference(timing, "reference without MPS")
        agreement["reference without MPS vs fast"] = against_reference("fast", "reference without MPS")
        ratios = [references["reference"][a] / ms for a, ms in without.items()]
        agreement["reference without MPS vs reference"] = {
            "cells": len(ratios), "median": statistics.median(abs(x - 1) for x in ratios),
            "max": max(abs(x - 1) for x in ratios), "median_ratio": statistics.median(ratios)}
    for name, _, _ in variants:
        agreement["default vs " + name] = differences(by_pass["default"], by_pass[name], floor)
        agreement["reference vs " + name] = against_reference(name)
        if without is not None:
            agreement["reference without MPS vs " + name] = against_reference(name, "reference without MPS")
    if args.cold_pass:
        agreement["reference vs fast, cold workers"] = against_reference("fast, cold workers")
        agreement["fast, cold workers vs fast"] = differences(by_pass["fast"], by_pass["fast, cold workers"], floor)
    print(json.dumps(agreement, indent=1), flush=True)
    write(args.out, info, summaries, agreement, by_pass, references)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
