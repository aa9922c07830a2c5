"""Where the evaluator and the plain reference loop part: the same NAS-Bench-201 cells timed several ways
in this one process (and, with --worker, by the evaluator's own worker process), each cell's ways back
to back, their order turned from cell to cell.

    python benchmarks/reference_gap.py --cells 32 --seed 91 --out benchmarks/results/h200/rate/fresh_s91
    python benchmarks/reference_gap.py --cells 32 --seed 91 --worker [--like-worker] --out OUT

The plain loop of `nasutil.evaluator.reference` (20 replays a window, 7 windows, the device synchronised
after each) read NAS-Bench-201 cells 2-10% slower than the evaluator, more on the lightest cells. Ways:
  plain        that loop as the rate benchmark runs it
  plain long   the same graph, 100 replays a window, 5 windows (a longer window)
  plain queued the reference's graph timed by the evaluator's windows (`time_windows`: one warm-up, 5
               windows of >= 2 ms queued behind a short device sleep, no synchronisation between them)
  evaluator    the evaluator's own capture (`modes.prepare`, eager warm-up) and windows, in this process
  plain again  the first way once more (drift over the cell's turn)
  worker       (--worker) the evaluator itself, one isolated worker process, fast settings, the same cell
  task here    (--worker) the worker's own task (`measure_task`: build, cast, copy, capture, windows) run
               in this process with the same settings: worker and task here part if the process is the
               cause, task here and the other ways part if the task's way of building and moving is
  built outside (--worker) the plain loop on the cell built outside inference mode, as the task builds it
  cast on cpu  (--worker) the plain loop on the cell cast to fp16 and channels_last on the CPU before the
               copy, as the task casts it
  task graph   (--worker) the plain loop replaying the graph that the task's own steps capture
               (`prepare` without eager warm-up, as in a worker that has captured before)
  task graph warmed (--worker) the same with `prepare`'s eager warm-up
  queued one a window (--worker) the reference's graph timed by the evaluator's windows, one replay each
  worker again (--worker) the same worker measuring the cell a second time, at once: the first reading of a
               cell in a worker comes right after another process had the device, the second does not
  worker lead-in N ms (--worker) another worker process, fast settings with N ms of untimed replays
               before the windows (`lead_in_ms`), for N in LEAD_INS
  worker window K (--worker) the K-th of the worker's first reading's timed windows alone
  task: SETTING (--worker) the task again with one of the full measurement's settings in place of the fast
               one (`eager warm-up`, `3 warm-ups`, `5 ms windows`, `7 windows`, `full`: all of them);
               with each task reading, its replays a window (`... iters`)
With --like-worker the ways in this process run as the worker runs them: TF32 off (`matmul_precision`,
as for fp16) and torch's CPU threads as 8 workers share this machine's cores.
Each reading comes with the SM clock NVML reported after it. The cells are `nb201_rate.py`'s for the same
`--seed` (its first cells), so the two files compare cell by cell. Writes reference_gap.csv and .json.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import statistics
from pathlib import Path

import numpy as np
import torch

from nasutil import get_space
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.counters import NvmlDevice
from nasutil.evaluator.dtypes import matmul_precision
from nasutil.evaluator.modes import prepare
from nasutil.evaluator.reference import capture_graph, graph_replay_ms, replay_ms
from nasutil.evaluator.timing import time_windows
from nasutil.evaluator.worker import measure_task

WAYS = ("plain", "plain long", "plain queued", "evaluator", "plain again")


def cells(n: int, seed: int) -> list[str]:
    space = get_space("nb201")
    every = [a.to_string() for a in space.enumerate()]
    return [every[i] for i in np.random.default_rng(seed).permutation(len(every))[:n]]


def queued_ms(fn, device: torch.device) -> float:
    return time_windows(fn, device, warmup=1, repeats=5, min_window_ms=2.0, max_iters=10_000, prefill=True).median_ms


def task_steps(arch: str, nvml: NvmlDevice | None) -> dict[str, float]:
    """The plain loop on the cell made the task's way, one difference at a time."""
    space = get_space("nb201")
    device = torch.device("cuda")
    readings: dict[str, float] = {}
    outside = space.build(space.parse(arch), num_classes=10).eval()  # parameters that are not inference tensors
    with torch.inference_mode():
        x = torch.randn(256, 3, 32, 32, device=device, dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        model = outside.to(device, torch.float16, memory_format=torch.channels_last)
        readings["built outside"] = graph_replay_ms(model, x, replays=20, windows=7)
        readings["built outside clock_mhz"] = nvml.sm_clock_mhz() if nvml is not None else float("nan")
        model = space.build(space.parse(arch), num_classes=10).eval()
        model = model.to(dtype=torch.float16, memory_format=torch.channels_last).to(device)
        readings["cast on cpu"] = graph_replay_ms(model, x, replays=20, windows=7)
        readings["cast on cpu clock_mhz"] = nvml.sm_clock_mhz() if nvml is not None else float("nan")
    for way, warm_up in (("task graph", False), ("task graph warmed", True)):
        model = space.build(space.parse(arch), num_classes=10).eval()
        model = model.to(dtype=torch.float16, memory_format=torch.channels_last)
        with matmul_precision("fp16"), torch.inference_mode():
            model = model.to(device)
            x = torch.randn(256, 3, 32, 32, device=device, dtype=torch.float16).contiguous(
                memory_format=torch.channels_last)
            run = prepare(model, x, "cudagraph", warm_up=warm_up)
            readings[way] = replay_ms(run.keep, replays=20, windows=7)
            readings[f"{way} clock_mhz"] = nvml.sm_clock_mhz() if nvml is not None else float("nan")
    with torch.inference_mode():
        model = space.build(space.parse(arch), num_classes=10).eval()
        model = model.to(device, torch.float16, memory_format=torch.channels_last)
        x = torch.randn(256, 3, 32, 32, device=device, dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        graph = capture_graph(model, x)
        readings["queued one a window"] = time_windows(graph.replay, device, warmup=5, repeats=7, min_window_ms=1e-3,
                                                       max_iters=1, prefill=True).median_ms
    return readings


TASK_SETTINGS = {"eager warm-up": {"eager_warm_up": True}, "3 warm-ups": {"warmup": 3},
                 "5 ms windows": {"min_window_ms": 5.0}, "7 windows": {"repeats": 7},
                 "full": {"eager_warm_up": True, "warmup": 3, "min_window_ms": 5.0, "repeats": 7,
                          "cv_threshold": 0.05}}


def task_settings(arch: str, config: MeasureConfig, order: list[str]) -> dict[str, float]:
    """The task with one fast setting at a time put back to the full measurement's, in `order`."""
    readings: dict[str, float] = {}
    for name in order:
        measured = measure_task(Candidate("nb201", arch), config.with_(**TASK_SETTINGS[name]))
        readings[f"task: {name}"] = measured.latency_ms if measured.ok else float("nan")
        readings[f"task: {name} iters"] = float(measured.timing.get("iters_per_window", float("nan")))
    return readings


LEAD_INS = (10.0, 30.0)  # lead-ins (ms) of the extra workers


def one_cell(arch: str, order: list[str], nvml: NvmlDevice | None, like_worker: bool = False,
             worker: Evaluator | None = None, config: MeasureConfig | None = None,
             lead_workers: dict[float, Evaluator] | None = None) -> dict[str, float]:
    space = get_space("nb201")
    device = torch.device("cuda")
    readings: dict[str, float] = {}
    if worker is not None:
        measured = worker.measure(Candidate("nb201", arch))
        readings["worker"] = measured.latency_ms if measured.ok else float("nan")
        readings["worker clock_mhz"] = measured.sm_clock_mhz or float("nan")
        for k, window in enumerate(measured.timing.get("windows_ms", []) if measured.ok else [], start=1):
            readings[f"worker window {k}"] = window
        again = worker.measure(Candidate("nb201", arch))
        readings["worker again"] = again.latency_ms if again.ok else float("nan")
        leads = sorted(lead_workers or {}, reverse=order[1] != WAYS[1])
        for lead in leads:
            led = lead_workers[lead].measure(Candidate("nb201", arch))
            readings[f"worker lead-in {lead:g} ms"] = led.latency_ms if led.ok else float("nan")
        here = measure_task(Candidate("nb201", arch), config)
        readings["task here"] = here.latency_ms if here.ok else float("nan")
        readings["task here clock_mhz"] = here.sm_clock_mhz or float("nan")
        readings["task here iters"] = float(here.timing.get("iters_per_window", float("nan")))
        settings = list(TASK_SETTINGS)
        readings.update(task_settings(arch, config, settings if order[1] == WAYS[1] else settings[::-1]))
        readings.update(task_steps(arch, nvml))
    flags = matmul_precision("fp16") if like_worker else contextlib.nullcontext()
    with flags, torch.inference_mode():
        model = space.build(space.parse(arch), num_classes=10).eval()
        model = model.to(device, torch.float16, memory_format=torch.channels_last)
        x = torch.randn(256, 3, 32, 32, device=device, dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        graph = capture_graph(model, x)
        run = prepare(model, x, "cudagraph", warm_up=True)
        for way in order:
            if way in ("plain", "plain again"):
                readings[way] = graph_replay_ms(model, x, replays=20, windows=7)
            elif way == "plain long":
                readings[way] = replay_ms(graph, replays=100, windows=5, warm=0)
            elif way == "plain queued":
                readings[way] = queued_ms(graph.replay, device)
            else:
                readings[way] = queued_ms(run.fn, device)
            readings[f"{way} clock_mhz"] = nvml.sm_clock_mhz() if nvml is not None else float("nan")
    return readings


def write(out: Path, rows: list[dict], like_worker: bool) -> dict:
    """reference_gap.json (each way's ratios to the plain loop) and reference_gap.csv from the cells so far."""
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cells": len(rows),
               "like_worker": like_worker}
    for way in [w for w in rows[0] if w not in ("arch", "plain") and not w.endswith(("clock_mhz", "iters"))]:
        ratios = [r[way] / r["plain"] for r in rows]
        summary[f"{way} / plain"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    light = sorted(rows, key=lambda r: r["plain"])[: max(1, len(rows) // 4)]
    summary["lightest quarter: evaluator / plain"] = statistics.median(r["evaluator"] / r["plain"] for r in light)
    summary["lightest quarter: plain long / plain"] = statistics.median(r["plain long"] / r["plain"] for r in light)
    (out / "reference_gap.json").write_text(json.dumps(summary, indent=1))
    with (out / "reference_gap.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--worker", action="store_true", help="also measure each cell with the evaluator's worker")
    parser.add_argument("--like-worker", action="store_true",
                        help="run the ways in this process with the worker's TF32 flags and CPU threads")
    args = parser.parse_args()
    if args.cells < 1:
        parser.exit(2, "reference_gap.py: error: --cells must be at least 1\n")
    if not torch.cuda.is_available():
        parser.exit(2, "reference_gap.py: error: needs a CUDA device\n")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.like_worker:
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // 8))
    worker, config, lead_workers = None, None, {}
    if args.worker:
        config = MeasureConfig(device="cuda", dtype="fp16", batch_size=256, mode="cudagraph", counters=False).fast()
        worker = Evaluator(config, workers=1, timeout_s=120)
        worker.start()
        lead_workers = {lead: Evaluator(config.with_(lead_in_ms=lead), workers=1, timeout_s=120) for lead in LEAD_INS}
        for evaluator in lead_workers.values():
            evaluator.start()
    try:
        nvml = NvmlDevice.for_torch_device(torch.device("cuda"))
    except Exception:
        nvml = None
    rows = []
    for i, arch in enumerate(cells(args.cells, args.seed)):
        middle = list(WAYS[1:4]) if i % 2 == 0 else list(reversed(WAYS[1:4]))
        readings = one_cell(arch, [WAYS[0], *middle, WAYS[4]], nvml, args.like_worker, worker, config, lead_workers)
        rows.append({"arch": arch, **readings})
        summary = write(args.out, rows, args.like_worker)  # after every cell: a call cut short keeps its cells
    for evaluator in [worker, *lead_workers.values()]:
        if evaluator is not None:
            evaluator.close()
    print(json.dumps(summary, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
