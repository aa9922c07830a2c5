"""Why the same NAS-Bench-201 cell can read slower the second time it is timed in one process: each cell's
CUDA graph timed several ways in turn, each reading with the SM and memory clocks NVML reported after it.

    python benchmarks/repeat_reading.py --cells 8 --seed 95 --out benchmarks/results/h200/rate/repeat_s95

A survivor measured beside a population matched the shipped H200 table within 0.5% while the same cell,
measured again in the same process after the population had stopped, read 5-11% slower; and the
evaluator's worker (a fresh process) read about 4% below the plain loop in the reference process. Ways,
for each cell in this order (fp16, batch 256, channels_last, the plain loop of
`nasutil.evaluator.reference`: 20 replays a window, 7 windows):
  first            the cell built, moved and captured, then timed
  first again      the same graph replayed once more, at once
  recaptured       the same network captured into a new graph
  rebuilt          a new network of the same cell, captured
  after empty      `torch.cuda.empty_cache()`, then a new network, captured
  first graph late the first graph, kept alive, replayed after all of the above
  ballast rebuilt  a new network built while 2 GB of other tensors stay allocated and 2 GB freed before
If `first graph late` reads as `first`, the slower readings belong to where the later graphs' memory lies,
not to the device's state. Writes repeat_reading.csv and .json (each way over `first`, median and range).
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from pathlib import Path

import numpy as np
import torch

from nasutil import get_space
from nasutil.evaluator.counters import NvmlDevice
from nasutil.evaluator.reference import capture_graph, replay_ms

# cells the survivor GPU test read both ways: its two fastest and its slowest, then random ones
SEEN = ["|skip_connect~0|+|skip_connect~0|skip_connect~1|+|skip_connect~0|skip_connect~1|skip_connect~2|",
        "|none~0|+|skip_connect~0|skip_connect~1|+|skip_connect~0|skip_connect~1|skip_connect~2|",
        "|nor_conv_3x3~0|+|nor_conv_1x1~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"]
WAYS = ("first", "first again", "recaptured", "rebuilt", "after empty", "first graph late", "ballast rebuilt")


def cells(n: int, seed: int) -> list[str]:
    space = get_space("nb201")
    every = [a.to_string() for a in space.enumerate()]
    drawn = [every[i] for i in np.random.default_rng(seed).permutation(len(every))[:max(0, n - len(SEEN))]]
    return SEEN + drawn


def build(arch: str) -> tuple[torch.nn.Module, torch.Tensor]:
    space = get_space("nb201")
    model = space.build(space.parse(arch), num_classes=10).eval()
    model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
    x = torch.randn(256, 3, 32, 32, device="cuda", dtype=torch.float16).contiguous(memory_format=torch.channels_last)
    return model, x


def clock(nvml: NvmlDevice | None, which: str) -> float:
    if nvml is None or nvml.handle is None:
        return float("nan")
    import pynvml

    return float(pynvml.nvmlDeviceGetClockInfo(nvml.handle, getattr(pynvml, which)))


def read_cell(arch: str, nvml: NvmlDevice | None) -> dict[str, float]:
    readings: dict[str, float] = {}

    def note(way: str, ms: float) -> None:
        readings[way] = ms
        readings[f"{way} sm_mhz"] = clock(nvml, "NVML_CLOCK_SM")
        readings[f"{way} mem_mhz"] = clock(nvml, "NVML_CLOCK_MEM")

    with torch.inference_mode():
        model, x = build(arch)
        first = capture_graph(model, x)
        note("first", replay_ms(first, 20, 7))
        note("first again", replay_ms(first, 20, 7))
        note("recaptured", replay_ms(capture_graph(model, x), 20, 7))
        model2, x2 = build(arch)
        note("rebuilt", replay_ms(capture_graph(model2, x2), 20, 7))
        del model2, x2
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        model3, x3 = build(arch)
        note("after empty", replay_ms(capture_graph(model3, x3), 20, 7))
        note("first graph late", replay_ms(first, 20, 7))
        freed = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        ballast = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
        del freed
        model4, x4 = build(arch)
        note("ballast rebuilt", replay_ms(capture_graph(model4, x4), 20, 7))
        del ballast
    return readings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--seed", type=int, default=95)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    nvml = NvmlDevice.for_torch_device(torch.device("cuda"))  # without NVML, readings without clocks
    rows = []
    for n, arch in enumerate(cells(args.cells, args.seed)):
        readings = read_cell(arch, nvml)
        rows.append({"arch": arch, **{k: round(v, 5) for k, v in readings.items()}})
        print(n, arch, " ".join(f"{w}={readings[w]:.4f}" for w in WAYS), flush=True)
    with open(args.out / "repeat_reading.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cells": len(rows)}
    for way in WAYS[1:]:
        ratios = [r[way] / r["first"] for r in rows]
        summary[f"{way} / first"] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
    (args.out / "repeat_reading.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
