"""What puts a GPU timing in its fast or its slow state: the same NAS-Bench-201 cells timed by the plain loop
of `nasutil.evaluator.reference` (20 replays a window, 7 windows; fp16, batch 256, channels_last) under
conditions that each test one explanation, each set in a fresh process.

    python benchmarks/measurement_state.py --cells 6 --seed 95 --out benchmarks/results/h200/rate/state_s95

The same cell reads two ways on an H200: the shipped table and survivors measured one at a time read
about 0.42 ms for the all-skip cell, while a lone process's plain loop, and survivors measured in a
population's batch after the first, read about 0.47 ms; and the evaluator's passes with one worker read
about 5% slower than with six taking turns (BENCHMARKS.md, "Seed 85"). Conditions:
  capture-first  each network captured without running it eagerly first: convolution plans chosen inside
                 the capture (the evaluator's fast settings once a worker has captured one)
  eager-first    two eager calls on a side stream, then the capture: plans chosen eagerly (the default
                 settings, the plain loop); both captures are the evaluator's own (`modes.prepare`)
  benchmark      as eager-first with `torch.backends.cudnn.benchmark = True`
  beside idle    as capture-first while another process holds a CUDA context and 1 GB on the device, idle
  after burst D  the cell's graph read once in steady state, then again D seconds after another process
                 ran a 50 ms burst of matrix products on the device, for D in BURST_DELAYS_S
  own burst D    the same with the burst run by this process, on its own stream, before the windows: if it
                 moves the reading as another process's burst does, a measurement can put the device in one
                 state itself before it times (`own burst settle`: the burst, then two settling windows)
  burst, exited D  as `after burst D` with a helper process that bursts once and exits before the reading:
                 whether the state outlives the other context
  worker         the evaluator (one isolated worker, default settings) measuring each cell twice in a row
  workers 4      the evaluator with 4 workers taking turns on the device, each cell measured twice
  worker positions  the two places a search's survivor readings part by (`survivor_positions.py`): one worker
                 measures each cell right after this process ran a burst on the device (`worker after
                 burst`: a population's first survivor of a batch, one at a time's survivors after their
                 training) and second in a batch, right after the worker timed the cell before it (`worker
                 second in batch`: a population's later survivors), the two orders alternated cell by cell
If `after burst 0` reads fast and the later delays return to steady state, a reading depends on how
recently another process had the device, not on the network, its plans or its memory. `steady` and
`after burst` are also timed by CUDA events and by the host's clock over the same 100-replay windows
(`... events`, `... wall`): if the host's clock does not see the difference, the events do not time the work;
NVML's clocks, power and clock event reasons after each of those windows go to the JSON file. For the first
cell, the CUDA kernels of one eager forward after the capture (torch.profiler) show which kernels the
plan conditions ended up with. Writes measurement_state.csv and .json (each condition over steady state).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PLAN_CONDITIONS = ("capture-first", "eager-first", "benchmark", "beside idle")
CONDITIONS = (*PLAN_CONDITIONS, "after burst", "own burst", "burst, exited", "worker", "worker positions")
BASELINES = {"own ": "own steady", "burst, exited": "exited steady", "exited ": "exited steady",
             "worker second": "worker after burst"}  # else `steady`
BURST_DELAYS_S = (0.0, 0.2, 1.0, 5.0)
HOLD_IDLE = ("import sys, torch; x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda'); "
             "torch.cuda.synchronize(); print('ready', flush=True); sys.stdin.read()")
BURST = ("import sys, time, torch\n"
         "a = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)\n"
         "torch.cuda.synchronize(); print('ready', flush=True)\n"
         "for line in sys.stdin:\n"
         "    end = time.perf_counter() + 0.05\n"
         "    while time.perf_counter() < end:\n"
         "        a @ a; torch.cuda.synchronize()\n"
         "    print('done', flush=True)\n")
BURST_ONCE = ("import time, torch\n"
              "a = torch.randn(4096, 4096, device='cuda', dtype=torch.float16)\n"
              "end = time.perf_counter() + 0.05\n"
              "while time.perf_counter() < end:\n"
              "    a @ a; torch.cuda.synchronize()\n")


def _model(arch: str):
    import torch

    from nasutil import get_space

    space = get_space("nb201")
    model = space.build(space.parse(arch), num_classes=10).eval()
    model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
    x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    return model, x


def _capture(model, x, eager_first: bool):
    """The evaluator's own capture (`modes.prepare`): two eager calls on a side stream first, or none (where a
    capture without them fails, it is retried with them, as in the evaluator)."""
    from nasutil.evaluator.modes import prepare

    return prepare(model, x, "cudagraph", warm_up=eager_first).keep


def _kernels(model, x) -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(x)
        torch.cuda.synchronize()
    rows = sorted(((e.key, e.device_time_total) for e in prof.key_averages()), key=lambda r: -r[1])
    return [{"kernel": k[:160], "us": round(t, 1)} for k, t in rows[:8]]


def plans(condition: str, archs: list[str]) -> dict:
    import torch

    from nasutil.evaluator.reference import replay_ms

    torch.backends.cudnn.benchmark = condition == "benchmark"
    readings, kernels = {}, []
    with torch.inference_mode():
        for n, arch in enumerate(archs):
            model, x = _model(arch)
            readings[arch] = replay_ms(_capture(model, x, condition in ("eager-first", "benchmark")), 20, 7)
            if n == 0:
                kernels = _kernels(model, x)
    return {"readings": readings, "kernels": kernels}


def event_and_wall_ms(graph, replays: int = 100, windows: int = 5) -> tuple[float, float]:
    """Median milliseconds a replay by CUDA events and by the host's clock over the same windows (the host
    clock from before the first launch to after the device finished): a second instrument, in case a
    state moves the events rather than the work."""
    import torch

    events, walls = [], []
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        began = time.perf_counter()
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        walls.append((time.perf_counter() - began) * 1e3 / replays)
        events.append(start.elapsed_time(end) / replays)
    return statistics.median(events), statistics.median(walls)


def device_state() -> dict[str, float]:
    """What NVML says of the device right now: SM and memory clocks, power draw, and the clock event
    reasons (a bit mask: a power cap or a slowdown can hold the effective clock below the one reported)."""
    import pynvml

    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    return {"sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "mem_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
            "event_reasons": pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)}


def after_burst(archs: list[str]) -> dict:
    import torch

    from nasutil.evaluator.reference import replay_ms

    helper = subprocess.Popen([sys.executable, "-c", BURST], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    helper.stdout.readline()
    readings: dict[str, dict[str, float]] = {}
    states: dict[str, list[dict[str, float]]] = {"steady": [], "after burst": []}
    try:
        with torch.inference_mode():
            for arch in archs:
                model, x = _model(arch)
                graph = _capture(model, x, eager_first=False)
                replay_ms(graph, 20, 7)  # settle
                got = {"steady": replay_ms(graph, 20, 7)}
                got["steady events"], got["steady wall"] = event_and_wall_ms(graph)
                states["steady"].append(device_state())
                for delay in BURST_DELAYS_S:
                    helper.stdin.write("go\n")
                    helper.stdin.flush()
                    helper.stdout.readline()
                    time.sleep(delay)
                    got[f"after burst {delay:g}"] = replay_ms(graph, 20, 7)
                    if delay == 0:  # the same state timed by both instruments, long windows
                        helper.stdin.write("go\n")
                        helper.stdin.flush()
                        helper.stdout.readline()
                        got["after burst events"], got["after burst wall"] = event_and_wall_ms(graph)
                        states["after burst"].append(device_state())
                got["steady again"] = replay_ms(graph, 20, 7)
                readings[arch] = got
    finally:
        helper.stdin.close()
        helper.wait()
    return {"readings": readings, "device states": states}


def _own_burst(a) -> None:
    """50 ms of matrix products in this process, as the helper's burst but in this context."""
    import torch

    end = time.perf_counter() + 0.05
    while time.perf_counter() < end:
        a @ a
        torch.cuda.synchronize()


def around_bursts(archs: list[str], burst, name: str, steady: str, then=None) -> dict:
    """Each cell's graph read in steady state (`steady`), then D seconds after `burst()` for D in
    BURST_DELAYS_S (`NAME D`); `then(graph, got)` adds readings of its own after those."""
    import torch

    from nasutil.evaluator.reference import replay_ms

    readings: dict[str, dict[str, float]] = {}
    with torch.inference_mode():
        for arch in archs:
            model, x = _model(arch)
            graph = _capture(model, x, eager_first=False)
            replay_ms(graph, 20, 7)  # settle
            got = {steady: replay_ms(graph, 20, 7)}
            for delay in BURST_DELAYS_S:
                burst()
                time.sleep(delay)
                got[f"{name} {delay:g}"] = replay_ms(graph, 20, 7)
            if then is not None:
                then(graph, got)
            readings[arch] = got
    return {"readings": readings}


def own_burst(archs: list[str]) -> dict:
    import torch

    from nasutil.evaluator.reference import replay_ms

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)

    def burst() -> None:  # 50 ms of matrix products in this process, as the helper's burst but in this context
        end = time.perf_counter() + 0.05
        while time.perf_counter() < end:
            a @ a
            torch.cuda.synchronize()

    def settled(graph, got: dict[str, float]) -> None:  # the burst, two windows to settle, then the reading
        burst()
        replay_ms(graph, 20, 2)
        got["own burst settle"] = replay_ms(graph, 20, 7)
        got["own burst events"], got["own burst wall"] = event_and_wall_ms(graph)
        got["own steady again"] = replay_ms(graph, 20, 7)

    return around_bursts(archs, burst, "own burst", "own steady", settled)


def burst_exited(archs: list[str]) -> dict:
    return around_bursts(archs, lambda: subprocess.run([sys.executable, "-c", BURST_ONCE], check=True),
                         "burst, exited", "exited steady")


def worker(archs: list[str]) -> dict:
    from nasutil.evaluator import Candidate, Evaluator, MeasureConfig

    with Evaluator(MeasureConfig(device="cuda"), cache=None) as evaluator:
        readings = {arch: {"worker": evaluator.measure(Candidate("nb201", arch)).latency_ms,
                           "worker again": evaluator.measure(Candidate("nb201", arch)).latency_ms} for arch in archs}
    with Evaluator(MeasureConfig(device="cuda"), cache=None, workers=4) as evaluator:
        twice = list(evaluator.measure_many([Candidate("nb201", arch) for arch in archs * 2]))
    for n, arch in enumerate(archs):
        readings[arch]["workers 4"] = min(twice[n].latency_ms, twice[n + len(archs)].latency_ms)
    return {"readings": readings}


def worker_positions(archs: list[str]) -> dict:
    """Each cell measured by one worker right after this process's burst, and second in a batch after another
    cell; which comes first alternates from cell to cell, and the cell before it in a batch is the previous one."""
    import torch

    from nasutil.evaluator import Candidate, Evaluator, MeasureConfig

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    readings: dict[str, dict[str, float]] = {}
    with Evaluator(MeasureConfig(device="cuda"), cache=None) as evaluator:
        evaluator.measure(Candidate("nb201", archs[-1]))  # the worker's first measurement, not counted
        for n, arch in enumerate(archs):
            before = archs[n - 1]

            def after_burst() -> float:
                _own_burst(a)
                return evaluator.measure(Candidate("nb201", arch)).latency_ms

            def second_in_batch() -> float:
                pair = [Candidate("nb201", before), Candidate("nb201", arch)]
                return list(evaluator.measure_many(pair))[1].latency_ms

            first, then = (after_burst, second_in_batch) if n % 2 == 0 else (second_in_batch, after_burst)
            got = {first.__name__: first(), then.__name__: then()}
            readings[arch] = {"worker after burst": got["after_burst"],
                              "worker second in batch": got["second_in_batch"]}
    return {"readings": readings}


def in_fresh_process(condition: str, archs: list[str]) -> dict:
    holder = None
    if condition == "beside idle":
        holder = subprocess.Popen([sys.executable, "-c", HOLD_IDLE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        holder.stdout.readline()  # its context exists and holds its memory
    try:
        done = subprocess.run([sys.executable, __file__, "--condition", condition, "--archs", *archs],
                              capture_output=True, text=True, check=True)
    finally:
        if holder is not None:
            holder.communicate("")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=6)
    parser.add_argument("--seed", type=int, default=95)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--conditions", nargs="+", choices=CONDITIONS, default=list(CONDITIONS),
                        help="the conditions to run, in this order (default: all)")
    parser.add_argument("--condition", help=argparse.SUPPRESS)  # one condition, in this process
    parser.add_argument("--archs", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.condition:
        run = {"after burst": after_burst, "own burst": own_burst, "burst, exited": burst_exited,
               "worker": worker, "worker positions": worker_positions}.get(args.condition)
        print(json.dumps(run(args.archs) if run else plans(args.condition, args.archs)))
        return
    if args.out is None:
        parser.error("--out is required")
    sys.path.insert(0, str(Path(__file__).parent))
    from repeat_reading import cells

    archs = cells(args.cells, args.seed)
    columns: dict[str, dict[str, float]] = {arch: {} for arch in archs}
    kernels, states = {}, {}
    for condition in args.conditions:
        result = in_fresh_process(condition, archs)
        for arch, got in result["readings"].items():
            columns[arch].update(got if isinstance(got, dict) else {condition: got})
        if result.get("kernels"):
            kernels[condition] = result["kernels"]
        if result.get("device states"):
            states = result["device states"]
        print(condition, {a[:40]: columns[a] for a in archs[:2]}, flush=True)
        write(args.out, archs, columns, kernels, states)  # what was read so far survives a time limit


def write(out: Path, archs: list[str], columns: dict[str, dict[str, float]], kernels: dict, states: dict) -> None:
    """measurement_state.csv (every reading) and .json (each condition over its own process's steady state
    where it has one, else over `steady`)."""
    names = list(columns[archs[0]])
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "measurement_state.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["arch", *(f"{n}_ms" for n in names)])
        writer.writerows([arch, *(round(columns[arch][n], 5) for n in names)] for arch in archs)
    import pynvml
    import torch

    pynvml.nvmlInit()  # the device's name without a CUDA context here, beside the conditions' fresh processes
    summary = {"device": pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)), "torch": torch.__version__,
               "cudnn": torch.backends.cudnn.version(), "cells": len(archs)}
    for name in names:
        base = next((b for prefix, b in BASELINES.items() if name.startswith(prefix)), "steady")
        if name not in (*BASELINES.values(), "steady") and base in names:
            ratios = [columns[a][name] / columns[a][base] for a in archs]
            summary[f"{name} / {base}"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    summary["kernels of the first cell"] = kernels
    summary["device after the windows (NVML)"] = states
    (out / "measurement_state.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
