"""How long stopping a measuring worker takes: nasutil's worker against a plain spawned process that returns.

    python benchmarks/worker_stop.py --device cpu --repeats 5 --out benchmarks/results/cpu/worker_stop

A search closes its measuring worker after its last trial, so the time a worker takes to stop is part of every
search's wall time. Each repeat, alternating which goes first:

- **nasutil**: an `Evaluator` (one isolated worker, as a search's `evaluator=auto` starts it) measures one
  NAS-Bench-201 cell, then `close()` is timed: it asks the worker to stop and waits for the process to end.
- **plain**: a process spawned by `multiprocessing` alone, which imports torch, runs the same cell's forward on the
  same device, waits for a message and then returns, as a plain worker loop would: the time from the message to
  the end of the process (`join`) is Python's whole shutdown. It shares no code with nasutil's worker.

Writes NAME.json (`--name`, worker_stop by default): both ways' seconds per repeat and their medians.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import statistics
import time
from pathlib import Path

ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


def plain_worker(conn, device: str) -> None:
    """Import torch, run a forward of the cell on `device`, say so, wait for the word to stop, and return."""
    import torch

    from nasutil import get_space

    network = get_space("nb201").build(ARCH, num_classes=10).to(device).eval()
    with torch.inference_mode():
        network(torch.randn(2, 3, 32, 32, device=device))
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    conn.send("ready")
    conn.recv()


def time_plain(device: str) -> float:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=plain_worker, args=(child, device), daemon=True)
    process.start()
    child.close()
    assert parent.recv() == "ready"
    started = time.perf_counter()
    parent.send(None)
    process.join(60)
    seconds = time.perf_counter() - started
    if process.exitcode != 0:
        raise SystemExit(f"the plain worker ended with status {process.exitcode}")
    return seconds


def time_nasutil(device: str) -> float:
    from nasutil.evaluator import Candidate, Evaluator, MeasureConfig

    config = MeasureConfig(device=device, dtype="fp32" if device == "cpu" else "fp16", batch_size=2,
                           mode="eager" if device == "cpu" else "cudagraph")
    evaluator = Evaluator(config, cache=None)
    measurement = evaluator.measure(Candidate("nb201", ARCH))
    if not measurement.ok:
        raise SystemExit(f"the measurement failed: {measurement.error}")
    started = time.perf_counter()
    evaluator.close()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--name", default="worker_stop", help="the result file's name, NAME.json")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    import torch

    device_name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else platform.processor() or "cpu"
    times: dict[str, list[float]] = {"nasutil": [], "plain": []}
    ways = {"nasutil": time_nasutil, "plain": time_plain}
    for repeat in range(args.repeats):
        order = ("nasutil", "plain") if repeat % 2 == 0 else ("plain", "nasutil")
        for way in order:
            times[way].append(ways[way](args.device))
        print(f"repeat {repeat + 1}: " + ", ".join(f"{way} {times[way][-1]:.3f} s" for way in order), flush=True)
    result = {"device": args.device, "device_name": device_name, "torch": torch.__version__, "cpus": mp.cpu_count(),
              "arch": ARCH, "repeats": args.repeats, "stop_s": times,
              "median_s": {way: statistics.median(v) for way, v in times.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["median_s"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
