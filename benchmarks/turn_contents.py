"""Which preparation work may leave a worker's device turn without MPS: a timer process reads one cell the way
`fast()` does (a short device sleep, then 4 one-replay windows, synchronised), over and over, while a second
process, with a context of its own, does nothing, captures CUDA graphs of networks already on the device, or
copies networks to it.

    python benchmarks/turn_contents.py --seconds 6 --out OUT

Phases, in this order: alone, captures, alone, copies, alone. Writes turn_contents.json: per phase the timer's
readings (median, 90th percentile, max, count) and the other process's work done (captures or copies a
second). A phase whose readings match `alone` says that work may run beside a timing.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import statistics
import time
from pathlib import Path

CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
PHASES = ("alone", "captures", "alone", "copies", "alone")


def _networks(count: int, seed: int):
    import numpy as np
    import torch

    from nasutil import get_space

    space = get_space("nb201")
    rng = np.random.default_rng(seed)
    return [space.build(space.sample(rng), num_classes=10).eval().to(torch.float16, memory_format=torch.channels_last)
            for _ in range(count)]


def timer(orders, readings) -> None:
    import torch

    from nasutil import get_space
    from nasutil.evaluator.reference import capture_graph

    space = get_space("nb201")
    model = space.build(space.parse(CELL), num_classes=10).eval().to("cuda", torch.float16,
                                                                      memory_format=torch.channels_last)
    x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    graph = capture_graph(model, x)
    readings.put(("ready", None))
    while (order := orders.get()) is not None:
        end, found = time.perf_counter() + order, []
        while time.perf_counter() < end:
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(4)]
            torch.cuda._sleep(1_000_000)
            for start, stop in events:
                start.record()
                graph.replay()
                stop.record()
            torch.cuda.synchronize()
            found.append(statistics.median(a.elapsed_time(b) for a, b in events))
        readings.put(("phase", found))


def disturber(orders, done, count: int, seed: int) -> None:
    import torch

    host = _networks(count, seed)
    x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    done.put(("ready", None))
    while (order := orders.get()) is not None:
        kind, seconds = order
        on_device = [m.to("cuda") for m in host] if kind == "captures" else []
        if on_device:  # library handles and workspaces made before the phase, as in a worker that has captured
            with torch.inference_mode():
                on_device[0](x)
        torch.cuda.synchronize()
        done.put(("set", None))
        go = orders.get()  # the start, sent with the timer's
        end, work = time.perf_counter() + seconds, 0
        while kind != "alone" and time.perf_counter() < end:
            if kind == "captures":
                graph = torch.cuda.CUDAGraph()
                with torch.inference_mode(), torch.cuda.graph(graph):
                    on_device[work % count](x)
                del graph
            else:
                moved = host[work % count].to("cuda")
                del moved
            work += 1
        if kind == "alone":
            time.sleep(seconds)
        del on_device, go
        torch.cuda.synchronize()
        done.put(("work", work / seconds))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--networks", type=int, default=24)
    parser.add_argument("--seed", type=int, default=117)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not (math.isfinite(args.seconds) and 0.5 <= args.seconds <= 600):  # a phase needs readings for its deciles
        parser.error(f"--seconds must be from 0.5 to 600, got {args.seconds:g}")
    if args.networks < 1:
        parser.error(f"--networks must be at least 1, got {args.networks}")
    import torch

    if not torch.cuda.is_available():
        parser.error("it times a CUDA device, and none is available here")
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = mp.get_context("spawn")
    to_timer, from_timer, to_other, from_other = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=timer, args=(to_timer, from_timer)),
             ctx.Process(target=disturber, args=(to_other, from_other, args.networks, args.seed))]
    for p in procs:
        p.start()
    assert from_timer.get()[0] == "ready" and from_other.get()[0] == "ready"
    phases = []
    for kind in PHASES:
        to_other.put((kind, args.seconds))
        assert from_other.get()[0] == "set"
        to_other.put("go")
        to_timer.put(args.seconds)
        found = from_timer.get()[1]
        work = from_other.get()[1]
        q = statistics.quantiles(found, n=10)
        phases.append({"phase": kind, "readings": len(found), "median_ms": statistics.median(found),
                       "p90_ms": q[-1], "max_ms": max(found), "work_per_s": work})
        print(json.dumps(phases[-1]), flush=True)
    to_timer.put(None)
    to_other.put(None)
    for p in procs:
        p.join(timeout=60)
    alone = statistics.median(p["median_ms"] for p in phases if p["phase"] == "alone")
    for p in phases:
        p["median_over_alone"] = p["median_ms"] / alone
    (args.out / "turn_contents.json").write_text(json.dumps({"cell": CELL, "phases": phases}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
