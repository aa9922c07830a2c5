"""What compiling a NAS-Bench-201 candidate costs, compiled whole or block by block, and what it gains.

    python benchmarks/compile_cost.py --device cpu --out benchmarks/results/cpu
    python benchmarks/compile_cost.py --device cuda --dtype fp16 --out benchmarks/results/h200/colocate

Compiling a whole network by Inductor (`nasutil.colocate.compiled`) takes seconds per candidate, and
every candidate is a new graph. Compiled block by block ("regional" compilation: the stem, each cell,
each reduction block and the head compiled on their own, weights not frozen), the blocks that all
candidates share (stem, reductions, head) compile once per process, and the five cells of a stage share
one compiled graph. The price is fusion across block borders and BatchNorm folding.

Each way runs in a child process of its own with empty Inductor and Triton caches, so neither finds the
other's kernels: `--candidates` sampled cells, one after another, each compiled and run once (its compile
seconds, and its outputs against the uncompiled network's), then each one's forward timed uncompiled and
compiled (on CUDA both captured in a CUDA graph and timed by CUDA events; on a CPU by the wall clock).
Writes compile_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAYS = ("whole", "regional")


def compile_network(model, way: str):
    """The model's compiled forward, compiled whole (weights frozen, as nasutil.colocate.compiled does) or
    block by block (in place)."""
    import torch

    if way == "whole":
        return torch.compile(model, dynamic=False, options={"freezing": True})
    for block in [model.stem, *model.cells, model.head]:
        block.compile(dynamic=False)
    return model


def timed_ms(fn, device: str, repeats: int = 50) -> float:
    import torch

    if device.startswith("cuda"):
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn(), fn()
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            fn()
        times = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(repeats):
                graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / repeats)
        return statistics.median(times)
    fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(max(1, repeats // 10)):
            fn()
        times.append(1e3 * (time.perf_counter() - t0) / max(1, repeats // 10))
    return statistics.median(times)


def child(way: str, candidates: int, device: str, dtype: str, batch: int, seed: int) -> list[dict]:
    import torch

    from nasutil import get_space
    from nasutil.colocate.compiled import many_networks

    torch_dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    memory_format = torch.channels_last if device.startswith("cuda") else torch.contiguous_format
    space = get_space("nb201")
    rows = []
    with torch.inference_mode(), many_networks():
        for n, arch in enumerate(space.sample_many(candidates, seed=seed)):
            torch.manual_seed(n)
            model = space.build(arch, num_classes=10, input_size=32).eval().to(device, torch_dtype,
                                                                               memory_format=memory_format)
            x = torch.randn(batch, 3, 32, 32, device=device, dtype=torch_dtype).contiguous(memory_format=memory_format)
            plain_out = model(x).float()
            plain_ms = timed_ms(lambda: model(x), device)
            start = time.perf_counter()
            fast = compile_network(model, way)
            out = fast(x).float()
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            compile_s = time.perf_counter() - start
            error = float((out - plain_out).abs().max() / plain_out.abs().max().clamp_min(1e-6))
            rows.append({"way": way, "candidate": n, "arch": arch.to_string(), "compile_s": compile_s,
                         "max_rel_error": error, "plain_ms": plain_ms, "compiled_ms": timed_ms(lambda: fast(x), device)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "fp16", "bf16"])
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    parser.add_argument("--child", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        rows = child(args.child, args.candidates, args.device, args.dtype, args.batch_size, args.seed)
        print("ROWS " + json.dumps(rows))
        return 0
    if args.out is None:
        parser.error("--out is required")
    rows = []
    for way in args.ways:
        with tempfile.TemporaryDirectory() as caches:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(caches, "inductor"),
                   "TRITON_CACHE_DIR": os.path.join(caches, "triton")}
            cmd = [sys.executable, __file__, "--child", way, "--candidates", str(args.candidates), "--device",
                   args.device, "--dtype", args.dtype, "--batch-size", str(args.batch_size), "--seed", str(args.seed)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        found = json.loads(next(line[5:] for line in out.splitlines() if line.startswith("ROWS ")))
        for row in found:
            print(json.dumps(row), flush=True)
        rows += found
    import torch

    summary = {"device": args.device if args.device == "cpu" else torch.cuda.get_device_name(),
               "cpu_cores": os.cpu_count(), "torch": torch.__version__, "dtype": args.dtype,
               "batch_size": args.batch_size, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compile_cost.json").write_text(json.dumps(summary, indent=1))
    for way in args.ways:
        mine = [r for r in rows if r["way"] == way]
        later = [r["compile_s"] for r in mine[1:]] or [mine[0]["compile_s"]]
        print(f"{way}: first {mine[0]['compile_s']:.1f} s, later candidates median {statistics.median(later):.1f} s; "
              f"compiled/plain time median {statistics.median(r['compiled_ms'] / r['plain_ms'] for r in mine):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
