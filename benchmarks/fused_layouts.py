"""Which memory layout and cuDNN algorithm choice suit the `fused` strategy's grouped convolutions?

    python benchmarks/fused_layouts.py --out benchmarks/results/h200/colocate

16 NAS-Bench-201 cells (seed 0), fp16, batch 32 and 256: `sequential` and `fused` prepared by
`nasutil.colocate.colocate` under channels_last and contiguous (NCHW) inputs, with cuDNN's heuristic
algorithm choice and with `torch.backends.cudnn.benchmark` (cuDNN times its algorithms on first use),
each replayed under CUDA events. Writes fused_layouts.csv.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import torch

from colocate_bench import events_ms  # this folder: the scripts share the reference clock
from nasutil import get_space
from nasutil.colocate import colocate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--networks", type=int, default=16)
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 256])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    space = get_space("nb201")
    archs = [a.to_string() for a in space.sample_many(args.networks, seed=0)]
    rows = []
    for benchmark in (False, True):
        torch.backends.cudnn.benchmark = benchmark
        for layout in ("channels_last", "contiguous"):
            fmt = getattr(torch, f"{layout}_format") if layout == "contiguous" else torch.channels_last
            models = [space.build(space.parse(a), num_classes=10).eval().cuda().half().to(memory_format=fmt)
                      for a in archs]
            for batch in args.batches:
                inputs = [torch.randn(batch, 3, 32, 32, device="cuda", dtype=torch.half).contiguous(memory_format=fmt)
                          for _ in archs]
                row = {"networks": args.networks, "batch": batch, "layout": layout, "cudnn_benchmark": benchmark}
                with torch.inference_mode():
                    for strategy in ("sequential", "fused", "streams"):
                        group = colocate(models, inputs, strategy, fallback=False)
                        for _ in range(3):
                            group.run()
                        row[f"{strategy}_ms"] = events_ms(group.run)
                        del group
                row["fused_speedup"] = row["sequential_ms"] / row["fused_ms"]
                row["streams_speedup"] = row["sequential_ms"] / row["streams_ms"]
                rows.append(row)
                print(row, flush=True)
                with (args.out / "fused_layouts.csv").open("w", newline="") as fh:
                    w = csv.DictWriter(fh, fieldnames=list(rows[0]))
                    w.writeheader()
                    w.writerows(rows)
                torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
