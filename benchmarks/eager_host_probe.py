"""What sets the pace of eager batch-1 inference: the process, Python's garbage collector, or the CPU the
launching thread runs on.

    python benchmarks/eager_host_probe.py --out benchmarks/results/h200/eager_host

A NAS-Bench-201 cell, fp16, batch 1, eager, channels_last: milliseconds per forward in a plain loop
(7 windows of 50 forwards, median), in this process and in a spawned child process running the same
code, alternating, under each condition: as is; with the collector off during the windows; pinned to
the CPUs nearest the GPU (its PCI device's local_cpulist) and to the others; after gc.freeze(). Records
each process's tracked-object count and the collections that ran during the windows. Writes
eager_host_probe.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path

CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
CONDITIONS = ["as_is", "gc_off", "near_cpus", "far_cpus", "as_is_again", "frozen"]


def _cpus(spec: str) -> set[int]:
    out: set[int] = set()
    for part in spec.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out |= set(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def near_cpus() -> set[int]:
    import pynvml

    pynvml.nvmlInit()
    bus = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).busId
    bus = bus.decode() if isinstance(bus, bytes) else bus
    path = Path("/sys/bus/pci/devices") / bus.lower()[-12:] / "local_cpulist"
    return _cpus(path.read_text()) if path.exists() else set(os.sched_getaffinity(0))


class Bench:
    def __init__(self) -> None:
        import torch

        from nasutil import get_space

        space = get_space("nb201")
        self.torch = torch
        self.model = space.build(space.parse(CELL), num_classes=10, input_size=32).eval().cuda().half()
        self.model = self.model.to(memory_format=torch.channels_last)
        self.x = torch.randn(1, 3, 32, 32, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
        self.all_cpus = set(os.sched_getaffinity(0))
        self.near = near_cpus() & self.all_cpus
        self.far = (self.all_cpus - self.near) or self.all_cpus
        with torch.inference_mode():
            for _ in range(50):
                self.model(self.x)
        torch.cuda.synchronize()

    def time(self, condition: str) -> dict:
        torch = self.torch
        os.sched_setaffinity(0, {"near_cpus": self.near, "far_cpus": self.far}.get(condition, self.all_cpus))
        if condition == "frozen":
            gc.collect()
            gc.freeze()
        if condition == "gc_off":
            gc.disable()
        before = [s["collections"] for s in gc.get_stats()]
        windows = []
        with torch.inference_mode():
            for _ in range(5):
                self.model(self.x)
            for _ in range(7):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(50):
                    self.model(self.x)
                torch.cuda.synchronize()
                windows.append((time.perf_counter() - t0) / 50 * 1e3)
        gc.enable()
        after = [s["collections"] for s in gc.get_stats()]
        os.sched_setaffinity(0, self.all_cpus)
        return {"ms": statistics.median(windows), "min_ms": min(windows), "max_ms": max(windows),
                "collections": [a - b for a, b in zip(after, before)], "tracked_objects": len(gc.get_objects()),
                "cpu": os.sched_getaffinity(0).__len__(), "near": sorted(self.near), "pid": os.getpid()}


def _child(conn) -> None:
    bench = Bench()
    conn.send("ready")
    while (condition := conn.recv()) is not None:
        conn.send(bench.time(condition))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    parent_conn, child_conn = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(child_conn,), daemon=True)
    proc.start()
    bench = Bench()
    assert parent_conn.recv() == "ready"
    rows = []
    for condition in CONDITIONS:
        for r in range(args.rounds):
            here = bench.time(condition)
            parent_conn.send(condition)
            child = parent_conn.recv()
            here_again = bench.time(condition) if condition != "frozen" else here
            row = {"condition": condition, "round": r, "parent_ms": (here["ms"] + here_again["ms"]) / 2,
                   "child_ms": child["ms"], "child_over_parent": child["ms"] / ((here["ms"] + here_again["ms"]) / 2),
                   "parent": here, "child": child}
            rows.append(row)
            print(f"{condition:12s} round {r}: parent {row['parent_ms']:.3f} ms  child {child['ms']:.3f} ms  "
                  f"ratio {row['child_over_parent']:.2f}  collections parent {here['collections']} child "
                  f"{child['collections']}  objects {here['tracked_objects']} / {child['tracked_objects']}", flush=True)
    parent_conn.send(None)
    proc.join(10)
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"cell": CELL, "near_cpus": sorted(bench.near), "all_cpus": sorted(bench.all_cpus), "rows": rows,
               "median_ratio": {c: statistics.median(r["child_over_parent"] for r in rows if r["condition"] == c)
                                for c in CONDITIONS}}
    (args.out / "eager_host_probe.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary["median_ratio"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
