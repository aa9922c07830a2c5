"""BatchNorm in training compiled by Inductor once per shape and shared by every layer and network of that shape.

    python benchmarks/batchnorm_compile.py --device cpu --out benchmarks/results/cpu/batchnorm_compile
    python benchmarks/batchnorm_compile.py --device cuda --out OUT     # adds kernels and times per call

A NAS-Bench-201 training step launches about 730 kernels at batch 64, 42% of them BatchNorm's (BENCHMARKS.md, "What
sets a population's speed-up"), and a population's steps are paced by how many kernels they launch. Compiling a
whole candidate fuses them but costs 14-33 s per architecture. BatchNorm layers, though, take few distinct shapes
across a space's networks: compiled as a function of its input, weight, bias and running statistics (not as a
module, whose identity Dynamo would guard on), one compiled graph could serve every layer of a shape in every
candidate. This checks that on the BatchNorm layers of `--cells` NAS-Bench-201 networks (drawn with `--seed`,
Fashion-MNIST's 28x28 input): how many graphs were compiled for how many layers and distinct shapes, the seconds
the first pass over them took against a second pass (Inductor's cache fresh unless `--warm-cache`), and for each
distinct shape how far the compiled forward, input and weight gradients and running statistics lie from the eager
ones (`F.batch_norm`), relative to the largest eager value. On CUDA it also counts
the kernels one forward and backward launches, eager and compiled (torch.profiler), and times both (a synchronize
around 50 calls, after 5). Writes batchnorm_compile.json.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

MOMENTUM, EPS = 0.1, 1e-5


def batch_norm_train(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, running_mean: torch.Tensor,
                     running_var: torch.Tensor) -> torch.Tensor:
    """Training BatchNorm as a function of its tensors, so that a compiled graph depends on their shapes only."""
    return F.batch_norm(x, running_mean, running_var, weight, bias, True, MOMENTUM, EPS)


def layer_shapes(cells: int, seed: int, batch: int) -> list[tuple[int, int, int, int]]:
    """The input shape of every BatchNorm layer of `cells` sampled networks, in order."""
    import numpy as np

    from nasutil.registry import get_space

    space = get_space("nb201")
    rng = np.random.default_rng(seed)
    shapes: list[tuple[int, int, int, int]] = []
    for _ in range(cells):
        model = space.build(space.sample(rng), num_classes=10, input_size=28)
        hooks = [m.register_forward_pre_hook(lambda _m, args: shapes.append(tuple(args[0].shape)))
                 for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        with torch.no_grad():
            model.eval()(torch.zeros(2, space.in_channels, 28, 28))
        for hook in hooks:
            hook.remove()
    return [(batch, *shape[1:]) for shape in shapes]


def one_pass(fn, shape, device, dtype, generator) -> tuple[torch.Tensor, ...]:
    """One forward and backward of `fn` on a fresh input of `shape`: output, input and weight gradients, running
    statistics."""
    channels = shape[1]
    x = torch.randn(shape, generator=generator).to(device=device, dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    weight = (1 + 0.1 * torch.randn(channels, generator=generator)).to(device).requires_grad_()
    bias = (0.1 * torch.randn(channels, generator=generator)).to(device).requires_grad_()
    mean, var = torch.zeros(channels, device=device), torch.ones(channels, device=device)
    y = fn(x, weight, bias, mean, var)
    (y.float() * torch.linspace(0, 1, y.numel(), device=device).view_as(y)).sum().backward()
    return y.detach(), x.grad, weight.grad, bias.grad, mean, var


def relative(eager: torch.Tensor, fused: torch.Tensor) -> float:
    """The largest difference over the largest eager magnitude: sums over 50,000 elements (a bias gradient) differ
    in their last bits by more than one element does."""
    scale = float(eager.float().abs().max()) or 1.0
    return float((eager.float() - fused.float()).abs().max()) / scale


def kernels_per_call(fn, shape, device, dtype) -> int:
    """Kernels one forward and backward launches (CUDA), by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    generator = torch.Generator().manual_seed(0)
    one_pass(fn, shape, device, dtype, generator)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        one_pass(fn, shape, device, dtype, generator)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def ms_per_call(fn, shape, device, dtype) -> float:
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        one_pass(fn, shape, device, dtype, generator)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(50):
        one_pass(fn, shape, device, dtype, generator)
    torch.cuda.synchronize()
    return 1e3 * (time.perf_counter() - started) / 50


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--cells", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warm-cache", action="store_true", help="keep Inductor's cache (default: a fresh one)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.cells < 1 or args.batch < 2:
        parser.exit(2, "batchnorm_compile.py: error: --cells must be >= 1 and --batch >= 2\n")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.exit(2, "batchnorm_compile.py: error: --device cuda needs a CUDA device\n")
    if not args.warm_cache:  # a cache of an earlier run would hide what compiling costs
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="batchnorm_compile_")
    from torch._dynamo.utils import counters

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32  # the trainer's activations on each
    shapes = layer_shapes(args.cells, args.seed, args.batch)
    distinct = sorted(set(shapes))
    compiled = torch.compile(batch_norm_train, dynamic=False)
    counters.clear()
    passes = []
    for _ in range(2):  # the first pass compiles, the second runs what was compiled
        generator = torch.Generator().manual_seed(args.seed)
        started = time.perf_counter()
        for shape in shapes:
            one_pass(compiled, shape, device, dtype, generator)
        if device.type == "cuda":
            torch.cuda.synchronize()
        passes.append(time.perf_counter() - started)
    graphs = int(counters["stats"]["unique_graphs"])
    agreement = []
    for shape in distinct:
        eager = one_pass(batch_norm_train, shape, device, dtype, torch.Generator().manual_seed(1))
        fused = one_pass(compiled, shape, device, dtype, torch.Generator().manual_seed(1))
        names = ("output", "input_grad", "weight_grad", "bias_grad", "running_mean", "running_var")
        row = {"shape": list(shape), **{f"{n}_max_rel_diff": relative(a, b) for n, a, b in zip(names, eager, fused)}}
        if device.type == "cuda":
            row.update({"eager_kernels": kernels_per_call(batch_norm_train, shape, device, dtype),
                        "compiled_kernels": kernels_per_call(compiled, shape, device, dtype),
                        "eager_ms": round(ms_per_call(batch_norm_train, shape, device, dtype), 4),
                        "compiled_ms": round(ms_per_call(compiled, shape, device, dtype), 4)})
        agreement.append(row)
    report = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "torch": torch.__version__, "dtype": str(dtype).replace("torch.", ""), "cells": args.cells,
              "seed": args.seed, "batch": args.batch, "layers": len(shapes), "distinct_shapes": len(distinct),
              "graphs_compiled": graphs, "first_pass_s": round(passes[0], 3), "second_pass_s": round(passes[1], 3), "warm_cache": args.warm_cache,
              "by_shape": agreement}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "batchnorm_compile.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
