"""Where a candidate's measurement time goes, phase by phase, in one process (no workers).

    python benchmarks/evaluator_phases.py --space mbconv --count 4 --batch-size 256 --mode cudagraph

Prints the evaluator's own phase timings per candidate, then times a network's first and
second eager forward on the device: a large gap there is one-off library work (convolution
algorithm selection, kernel compilation) that every new layer shape pays once per process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from nasutil import get_space
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
from nasutil.evaluator.dtypes import torch_dtype


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--space", default="mbconv")
    parser.add_argument("--count", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--mode", default="cudagraph")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    space = get_space(args.space)
    archs = [a.to_string() for a in space.sample_many(args.count, args.seed)]
    config = MeasureConfig(device="cuda", dtype="fp16", batch_size=args.batch_size, mode=args.mode, counters=False,
                           warmup=2, repeats=5, min_window_ms=2.0)
    with Evaluator(config, isolate=False) as evaluator:
        for arch in archs:
            t0 = time.perf_counter()
            m = evaluator.measure(Candidate(args.space, arch))
            print(json.dumps({"total_s": round(time.perf_counter() - t0, 3), "latency_ms": m.latency_ms,
                              "phases": {k: round(v, 4) for k, v in m.timing.items() if k.endswith("_s")}}),
                  flush=True)
    dtype = torch_dtype("fp16")
    for arch in space.sample_many(2, args.seed + 1):
        model = space.build(arch).to("cuda", dtype).to(memory_format=torch.channels_last).eval()
        x = torch.randn(args.batch_size, space.in_channels, space.default_input_size, space.default_input_size,
                        device="cuda", dtype=dtype).contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            for label in ("first", "second"):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(x)
                torch.cuda.synchronize()
                print(f"{label} eager forward: {1e3 * (time.perf_counter() - t0):.1f} ms", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
