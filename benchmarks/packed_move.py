"""Whether the evaluator should move a candidate to the device in one packed copy per dtype
(`nasutil.colocate.transfer`, which a population's members use) instead of `Module.to`: the host time of the
move, and the replay latency of the network moved each way.

    python benchmarks/packed_move.py --cells 120 --out OUT

For each of --cells fresh NAS-Bench-201 cells (fp16, batch 256, channels_last), in one process: the network is
built and cast on the host twice, moved once each way (the order alternating from cell to cell), each copy's
CUDA graph captured and timed by a plain replay loop. Writes packed_move.json (summary) and packed_move.csv.
(On an H100 the packed move took longer for a candidate alone, 11.9 ms against 7.3 ms at the median, so the
evaluator keeps `Module.to`: BENCHMARKS.md, "Shorter fast timings".)
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from nasutil import get_space
from nasutil.space import SearchSpace
from nasutil.colocate.transfer import move_to_device
from nasutil.evaluator.reference import graph_replay_ms

WAYS = ("packed", "module_to")


def moved(space: SearchSpace, arch: str, way: str) -> tuple[torch.nn.Module, float]:
    model = space.build(space.parse(arch), num_classes=10).eval()
    model = model.to(dtype=torch.float16, memory_format=torch.channels_last)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if way == "packed":
        model = move_to_device(model, torch.device("cuda"), channels_last=True)
    else:
        model = model.to("cuda")
    torch.cuda.synchronize()
    return model, (time.perf_counter() - t0) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=120)
    parser.add_argument("--seed", type=int, default=115)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.cells < 1:
        parser.error(f"--cells must be at least 1, got {args.cells}")
    if not torch.cuda.is_available():
        parser.error("it moves networks to a CUDA device, and none is available here")
    args.out.mkdir(parents=True, exist_ok=True)
    space = get_space("nb201")
    every = [a.to_string() for a in space.enumerate()]
    archs = [every[i] for i in np.random.default_rng(args.seed).permutation(len(every))[: args.cells]]
    x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    rows = []
    with torch.inference_mode():
        for way in WAYS:  # first-use costs, untimed
            moved(space, archs[0], way)
        for n, arch in enumerate(archs):
            for way in (WAYS if n % 2 == 0 else WAYS[::-1]):
                model, move_ms = moved(space, arch, way)
                rows.append({"arch": arch, "way": way, "move_ms": move_ms,
                             "replay_ms": graph_replay_ms(model, x, replays=20, windows=7)})
    by = {w: {r["arch"]: r for r in rows if r["way"] == w} for w in WAYS}
    ratios = [by["packed"][a]["replay_ms"] / by["module_to"][a]["replay_ms"] for a in archs]
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cells": len(archs),
               "seed": args.seed,
               "median_move_ms": {w: statistics.median(r["move_ms"] for r in by[w].values()) for w in WAYS},
               "replay_packed_over_module_to": {"median": statistics.median(ratios), "min": min(ratios),
                                                "max": max(ratios)}}
    (args.out / "packed_move.json").write_text(json.dumps(summary, indent=1))
    with (args.out / "packed_move.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
