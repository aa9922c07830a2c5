"""What a captured training step launches, and how fast its graphs run alone and together: where a
population's device time goes when its steps are too small to fill the GPU.

    python benchmarks/step_kernels.py --cells 16 --batches 64 256 --out benchmarks/results/h100/step_kernels

For each batch size and variant (`bf16-cl`, the trainer's default: bf16 autocast and channels_last; also
`bf16-nchw`, `fp32-cl`, `fp32-nchw`: no autocast, TF32 convolutions; on an H100 the fp32 variants stopped on a
misaligned address and hung, BENCHMARKS.md; `fp16-cl`, `fp16-nchw`: fp16 autocast, whose BatchNorm runs in cuDNN,
without a loss scaler, so for kernels and speed only), the same NAS-Bench-201 cells are:

- counted: the kernels (and memory copies and sets) one eager step of each cell runs on the device, by
  torch.profiler, grouped by what they do (the graph holds the same launches); the cells' BatchNorm layers
  and all-zero edges are listed beside them, which the step's kernels follow;
- timed: each cell's graph replayed alone, then all of them replayed together round by round on their own
  streams (`cotrain_speed.py`'s helpers), by the wall clock with the device synchronised and by CUDA events.

The variants run in turn, in reverse order at every other batch size. Inputs are random 3x32x32 tensors:
only kernels and speed are measured. Running one checkout's copy against another's on one machine compares
two versions of the step. Writes NAME.json and NAME.csv.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import re
import statistics
import sys
from collections import Counter
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cotrain_speed import Quiet, data, models, one_at_a_time, rate, together  # noqa: E402

from nasutil import get_space  # noqa: E402
from nasutil.search.trainers.torch_trainer import TorchTrainer, _Run  # noqa: E402

VARIANTS = {"bf16-cl": (True, True), "bf16-nchw": (True, False), "fp32-cl": (False, True),
            "fp32-nchw": (False, False), "fp16-cl": (True, True), "fp16-nchw": (True, False)}
#: variants whose autocast computes in float16, not the trainer's bfloat16 (no loss scaling: kernels and speed only)
HALF = {"fp16-cl", "fp16-nchw"}


class HalfTrainer(TorchTrainer):
    """The trainer with float16 autocast: BatchNorm on float16 inputs with float32 weights runs in cuDNN
    (PyTorch sends bfloat16 to its own kernels). Without a loss scaler: for counting and timing only."""

    @property
    def _amp_dtype(self) -> torch.dtype:
        return torch.float16

#: what a kernel does, by its name (first match wins)
KINDS = [("weight or dtype cast", r"copy|cast|to_copy|convert"), ("batch norm", r"batch_?norm|bn_|welford|bn"),
         ("convolution", r"conv|cudnn|xmma|implicit|gemm|sm\d\d_|cutlass|winograd|fft|dgrad|wgrad"),
         ("relu", r"threshold|relu|clamp_min"), ("pooling", r"pool"), ("optimizer (foreach)", r"foreach|multi_tensor"),
         ("add or sum", r"add|sum|reduce"), ("index and loss", r"index|gather|scatter|nll|softmax|cross")]


def kind_of(name: str) -> str:
    low = name.lower()
    if low.startswith("memcpy"):
        return "memcpy"
    if low.startswith("memset"):
        return "memset"
    for kind, pattern in KINDS:
        if re.search(pattern, low):
            return kind
    return "other"


def runs_for(archs: list[str], batch: int, dataset: dict, seed: int, amp: bool, channels_last: bool,
             graphs: bool, half: bool = False) -> list[_Run]:
    trainer = (HalfTrainer if half else TorchTrainer)(dataset="digits", batch_size=batch, epochs=1, device="cuda",
                                                      graphs=graphs, seed=seed, compile=False, amp=amp,
                                                      channels_last=channels_last)
    return [_Run(trainer, m, 3, Quiet(), n, dataset) for n, m in enumerate(models(archs, seed))]


def census(runs: list[_Run]) -> dict:
    """Device events of one eager step per cell (after two steps unrecorded), by kind and in all."""
    per_cell, kinds, names = [], Counter(), Counter()
    for run in runs:
        for _ in range(2):
            run.step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            run.step()
            torch.cuda.synchronize()
        device = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        per_cell.append(len(device))
        for e in device:
            kinds[kind_of(e.name)] += 1
            names[e.name[:90]] += 1
    n = len(runs)
    return {"events_per_step": statistics.fmean(per_cell), "events_per_cell": per_cell,
            "by_kind_per_step": {k: round(v / n, 1) for k, v in kinds.most_common()},
            "top_names_per_step": {k: round(v / n, 1) for k, v in names.most_common(25)}}


def structure(archs: list[str]) -> dict:
    """What the cells hold that the step's kernels follow: BatchNorm layers and all-zero edges, per cell."""
    counts = []
    for model in models(archs, 0):
        layers = sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
        zero = sum(type(m).__name__ == "Zero" for m in model.modules())
        counts.append((layers, zero))
    return {"batch_norm_layers_per_cell": [c[0] for c in counts], "zero_edges_per_cell": [c[1] for c in counts]}


def measure(archs: list[str], batch: int, variant: str, seed: int, warm_up: int, steps: int) -> dict:
    amp, channels_last = VARIANTS[variant]
    dataset = data(batch * (2 * (warm_up + steps) + 10))
    row: dict = {"variant": variant, "batch": batch, "cells": len(archs), "steps": steps}
    eager = runs_for(archs, batch, dataset, seed, amp, channels_last, graphs=False, half=variant in HALF)
    row["census"] = census(eager)
    del eager
    graphed = runs_for(archs, batch, dataset, seed, amp, channels_last, graphs=True, half=variant in HALF)
    for run in graphed:
        run.step_unit.capture()
    torch.cuda.synchronize()
    row["graph_alone"] = rate(one_at_a_time(graphed, warm_up, steps), steps)
    wall, events = together(graphed, warm_up, steps)
    row["graph_together"] = {"steps_per_s": len(archs) * steps / wall, "steps_per_s_events": len(archs) * steps / events}
    row["together_over_alone"] = row["graph_together"]["steps_per_s"] / row["graph_alone"]["steps_per_s"]
    row["us_per_device_event_together"] = 1e6 / (row["graph_together"]["steps_per_s"] * row["census"]["events_per_step"])
    for run in graphed:
        run.step_unit.release()
    del graphed
    gc.collect()
    torch.cuda.empty_cache()
    return row


def write_csv(rows: list[dict], path: Path) -> None:
    kinds = sorted({k for r in rows for k in r["census"]["by_kind_per_step"]})
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["batch", "variant", "device_events_per_step", "graph_alone_steps_per_s", "graph_alone_steps_per_s_events",
                    "together_steps_per_s", "together_steps_per_s_events", "together_over_alone",
                    "us_per_device_event_together", *kinds])
        for r in rows:
            w.writerow([r["batch"], r["variant"], round(r["census"]["events_per_step"], 1),
                        round(r["graph_alone"]["steps_per_s"], 1), round(r["graph_alone"]["steps_per_s_events"], 1),
                        round(r["graph_together"]["steps_per_s"], 1),
                        round(r["graph_together"]["steps_per_s_events"], 1), round(r["together_over_alone"], 3),
                        round(r["us_per_device_event_together"], 3),
                        *(r["census"]["by_kind_per_step"].get(k, 0) for k in kinds)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=16)
    parser.add_argument("--batches", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--variants", nargs="+", default=["bf16-cl"], choices=list(VARIANTS))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warm-up", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="step_kernels")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("step_kernels.py needs a CUDA device", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = False
    archs = [a.to_string() for a in get_space("nb201").sample_many(args.cells, seed=args.seed)]
    rows = []
    for i, batch in enumerate(args.batches):
        for variant in (args.variants if i % 2 == 0 else list(reversed(args.variants))):
            row = measure(archs, batch, variant, args.seed, args.warm_up, args.steps)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "census"}), flush=True)
            print(json.dumps(row["census"]["by_kind_per_step"]), flush=True)
            print(json.dumps(row["census"]["top_names_per_step"]), flush=True)
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "cudnn": torch.backends.cudnn.version(), "archs": archs, **structure(archs), "rows": rows}
    (args.out / f"{args.name}.json").write_text(json.dumps(summary, indent=1))
    write_csv(rows, args.out / f"{args.name}.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
