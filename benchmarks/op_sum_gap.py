"""Where a network's time goes that its op listing does not show: kernel time per aten op, from
torch.profiler, beside the network's CUDA-graph latency.

    python benchmarks/op_sum_gap.py --spaces darts:12,nb101:12,nb201:6 --out benchmarks/results/h200

For each sampled network (fp16, channels_last, the space's default input): the latency of its CUDA
graph replayed in a plain loop (CUDA events), the total kernel time of one eager forward under
torch.profiler, and that kernel time split by the aten op that launched it (self device time), with
each op's call count. The operator-level predictor sums the ops the listing holds; kernel time
under `aten::copy_`, `aten::cat` or layout conversions that the listing lacks is what it cannot see.
Writes op_sum_gap.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from nasutil import get_space
from nasutil.evaluator.reference import graph_replay_ms


def kernel_breakdown(model: torch.nn.Module, x: torch.Tensor, forwards: int = 5) -> dict[str, dict[str, float]]:
    """Self device time (us per forward) and calls per forward of each aten op, over `forwards` forwards."""
    with torch.inference_mode():
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
            for _ in range(forwards):
                model(x)
            torch.cuda.synchronize()
    out: dict[str, dict[str, float]] = {}
    for event in prof.key_averages():
        device_us = getattr(event, "self_device_time_total", None)
        if device_us is None:
            device_us = event.self_cuda_time_total
        if device_us > 0 and event.key.startswith("aten::"):
            out[event.key] = {"us": device_us / forwards, "calls": event.count / forwards}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spaces", default="darts:12,nb101:12,nb201:6", help="NAME:COUNT,...")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for item in args.spaces.split(","):
        name, _, count = item.partition(":")
        space = get_space(name)
        size = space.check_input_size(None)
        for arch in space.sample_many(int(count), seed=args.seed):
            model = space.build(arch, num_classes=10, input_size=size).eval()
            model = model.to("cuda", torch.float16, memory_format=torch.channels_last)
            x = torch.randn(args.batch_size, space.in_channels, size, size, device="cuda", dtype=torch.float16)
            x = x.contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                graph_ms = graph_replay_ms(model, x)
            ops = kernel_breakdown(model, x)
            row = {"space": name, "arch": arch.to_string(), "batch_size": args.batch_size, "graph_ms": graph_ms,
                   "kernel_us": sum(v["us"] for v in ops.values()), "ops": ops}
            rows.append(row)
            top = sorted(ops.items(), key=lambda kv: -kv[1]["us"])[:4]
            print(f"{name} graph {graph_ms:.3f} ms, kernels {row['kernel_us'] / 1e3:.3f} ms: "
                  + ", ".join(f"{k} {v['us']:.0f}us" for k, v in top), flush=True)
            del model, x
            torch.cuda.empty_cache()
    summary = {}
    for name in {r["space"] for r in rows}:
        mine = [r for r in rows if r["space"] == name]
        keys = {k for r in mine for k in r["ops"]}
        summary[name] = {k: statistics.median(r["ops"].get(k, {"us": 0.0})["us"] / r["kernel_us"] for r in mine)
                         for k in sorted(keys)}
    (args.out / "op_sum_gap.json").write_text(json.dumps({"rows": rows, "median_share": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
