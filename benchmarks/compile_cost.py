"""What compiling a NAS-Bench-201 candidate costs, compiled whole or block by block, and what it gains.

    python benchmarks/compile_cost.py --device cpu --out benchmarks/results/cpu
    python benchmarks/compile_cost.py --device cpu --training --out benchmarks/results/cpu
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
`--training` compiles training steps instead (train mode, forward and backward, no frozen weights): the
compile seconds of the first step, its loss and gradients against the uncompiled step's, both steps'
gradients against the same step in float64 (each by ‖g − reference‖ / ‖reference‖ over all of them), and
the time of
a step (forward and backward, wall clock with the device synchronised). Writes compile_cost.json, or
compile_cost_training.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WAYS = ("whole", "regional")


def compile_network(model, way: str, training: bool = False):
    """The model's compiled forward, compiled whole (as nasutil.colocate.compiled does: weights frozen for
    inference) or block by block (in place)."""
    import torch

    if way == "whole":
        return torch.compile(model, dynamic=False, options={} if training else {"freezing": True})
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


def wall_ms(fn, device: str, repeats: int = 10) -> float:
    import torch

    def sync():
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    fn()
    times = []
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        for _ in range(repeats):
            fn()
        sync()
        times.append(1e3 * (time.perf_counter() - t0) / repeats)
    return statistics.median(times)


def child_training(way: str, candidates: int, device: str, dtype: str, batch: int, seed: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from nasutil import get_space
    from nasutil.colocate.compiled import many_networks

    autocast = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    memory_format = torch.channels_last if device.startswith("cuda") else torch.contiguous_format
    space = get_space("nb201")
    rows = []

    def error(these, against) -> float:
        """Norm-wise over all gradients: single tensors behind a BatchNorm in train mode cancel to near zero."""
        difference = torch.cat([(g.double() - r.double()).flatten() for g, r in zip(these, against)]).norm()
        return float(difference / torch.cat([r.double().flatten() for r in against]).norm())

    with many_networks():
        for n, arch in enumerate(space.sample_many(candidates, seed=seed)):
            torch.manual_seed(n)
            model = space.build(arch, num_classes=10, input_size=32).train().to(device, memory_format=memory_format)
            x = torch.randn(batch, 3, 32, 32, device=device).contiguous(memory_format=memory_format)
            y = torch.randint(0, 10, (batch,), device=device)

            def step(forward):
                model.zero_grad(set_to_none=True)
                with torch.autocast(torch.device(device).type, dtype=autocast or torch.bfloat16,
                                    enabled=autocast is not None):
                    loss = F.cross_entropy(forward(x), y)
                loss.backward()
                return loss.detach().float()

            saved = {k: v.clone() for k, v in model.state_dict().items()}
            reference = copy.deepcopy(model).double()  # the step in float64, what both are held against
            F.cross_entropy(reference(x.double()), y).backward()
            exact = [p.grad for p in reference.parameters() if p.grad is not None]
            plain_loss = step(model)
            plain_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
            plain_ms = wall_ms(lambda: step(model), device)
            model.load_state_dict(saved)  # the BatchNorm statistics the timed steps moved
            start = time.perf_counter()
            fast = compile_network(model, way, training=True)
            loss = step(fast)
            if device.startswith("cuda"):
                torch.cuda.synchronize()
            compile_s = time.perf_counter() - start
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            rows.append({"way": way, "candidate": n, "arch": arch.to_string(), "compile_s": compile_s,
                         "loss_rel_error": float(abs(loss - plain_loss) / plain_loss),
                         "grad_rel_error": error(grads, plain_grads),
                         "plain_grad_error_vs_float64": error(plain_grads, exact),
                         "compiled_grad_error_vs_float64": error(grads, exact),
                         "plain_ms": plain_ms, "compiled_ms": wall_ms(lambda: step(fast), device)})
            print(json.dumps(rows[-1]), flush=True)
    return rows


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
    parser.add_argument("--training", action="store_true", help="compile training steps, not inference")
    parser.add_argument("--child", choices=WAYS, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        run = child_training if args.training else child
        rows = run(args.child, args.candidates, args.device, args.dtype, args.batch_size, args.seed)
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
                   args.device, "--dtype", args.dtype, "--batch-size", str(args.batch_size), "--seed", str(args.seed),
                   *(["--training"] if args.training else [])]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        found = json.loads(next(line[5:] for line in out.splitlines() if line.startswith("ROWS ")))
        for row in found:
            print(json.dumps(row), flush=True)
        rows += found
    import torch

    summary = {"device": args.device if args.device == "cpu" else torch.cuda.get_device_name(),
               "cpu_cores": os.cpu_count(), "torch": torch.__version__, "dtype": args.dtype,
               "batch_size": args.batch_size, "training": args.training, "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    name = "compile_cost_training.json" if args.training else "compile_cost.json"
    (args.out / name).write_text(json.dumps(summary, indent=1))
    for way in args.ways:
        mine = [r for r in rows if r["way"] == way]
        later = [r["compile_s"] for r in mine[1:]] or [mine[0]["compile_s"]]
        print(f"{way}: first {mine[0]['compile_s']:.1f} s, later candidates median {statistics.median(later):.1f} s; "
              f"compiled/plain time median {statistics.median(r['compiled_ms'] / r['plain_ms'] for r in mine):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
