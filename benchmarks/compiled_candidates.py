"""Fewer, fused kernels inside each candidate: NAS-Bench-201 cells compiled by Inductor and then captured
in CUDA graphs the way the co-location engine captures them, against the same cells captured plain.

    python benchmarks/compiled_candidates.py --out benchmarks/results/h200/colocate

A co-located group of small candidates is bound by how many kernels the GPU works through, not by their
arithmetic: every ReLU, BatchNorm and sum in a cell is a kernel of its own. Inductor folds BatchNorm into
the convolutions (freezing, for inference) and fuses the rest into a few generated kernels. Measured here:

- inference (`--cells` cells, fp16, channels_last, each network its own input): each network's graph
  replayed one after another (`sequential`) and one graph of one stream per network (`streams`), for the
  plain networks and the compiled ones (compiled here by `torch.compile` itself, weights frozen, as
  `nasutil.colocate.compiled` does with `freezing=True`, independently of it), all timed by CUDA events in the same process;
  the compiled outputs against the plain ones; kernels per forward (torch.profiler) of the first network;
- training (`--train-candidates` cells): each candidate's whole step (`nasutil.colocate.training_step`,
  bf16 autocast, SGD Nesterov) captured in a CUDA graph, plain or compiled (`compiled=True`): steps per
  second one candidate at a time and all together on their own streams, and the loss of both after the
  same steps.

Compile times are reported: they are what a compiled candidate costs before its first step. Stages run in
the order given and stop before `--budget-s` seconds have passed; each row is appended to
compiled_candidates.jsonl as it is measured, and compiled_candidates.json holds them all at the end.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn as nn

from colocate_bench import events_ms
from nasutil import get_space
from nasutil.colocate.compiled import many_networks
from nasutil.colocate.strategies import Sequential, Streams
from nasutil.colocate.training_step import TrainingStep, cosine_rates


def networks(archs: list[str], seed: int) -> list[nn.Module]:
    space, out = get_space("nb201"), []
    for n, arch in enumerate(archs):
        torch.manual_seed(seed * 100_003 + n)
        out.append(space.build(space.parse(arch), num_classes=10, input_size=32))
    return out


def kernels_per_call(fn) -> int:
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


def time_pair(a, b, replays: int) -> tuple[float, float]:
    """a and b timed alternately (a, b, a), a's two timings averaged."""
    for _ in range(3):
        a(), b()
    first, second, third = events_ms(a, replays), events_ms(b, replays), events_ms(a, replays)
    return (first + third) / 2, second


def inference(archs: list[str], batch: int, mode: str, seed: int, replays: int) -> dict:
    models = [m.eval().cuda().half().to(memory_format=torch.channels_last) for m in networks(archs, seed)]
    torch.manual_seed(1)
    inputs = [torch.randn(batch, 3, 32, 32, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
              for _ in archs]
    row = {"part": "inference", "networks": len(archs), "batch": batch, "mode": mode}
    with torch.inference_mode():
        plain_out = [m(x).float() for m, x in zip(models, inputs)]
        plain_kernels = kernels_per_call(lambda: models[0](inputs[0]))
        plain = [Sequential().prepare(models, inputs), Streams().prepare(models, inputs)]
        row["plain_sequential_ms"], row["plain_streams_ms"] = time_pair(plain[0].run, plain[1].run, replays)
        row["plain_kernels_first_network"] = plain_kernels
        torch._dynamo.reset()
        options = {"freezing": True}
        if mode == "max-autotune":
            options["max_autotune"] = True
        compiled = [torch.compile(m, dynamic=False, options=options) for m in models]
        t0 = time.perf_counter()
        compiled_out = [c(x).float() for c, x in zip(compiled, inputs)]
        torch.cuda.synchronize()
        row["compile_s_per_network"] = (time.perf_counter() - t0) / len(archs)
        row["max_rel_error"] = max(float((c - p).abs().max() / p.abs().max().clamp_min(1e-6))
                                   for c, p in zip(compiled_out, plain_out))
        row["compiled_kernels_first_network"] = kernels_per_call(lambda: compiled[0](inputs[0]))
        fast = [Sequential().prepare(compiled, inputs), Streams().prepare(compiled, inputs)]
        row["compiled_sequential_ms"], row["compiled_streams_ms"] = time_pair(fast[0].run, fast[1].run, replays)
        # the plain pair again, after the compiled one, to see that the device did not drift
        again = time_pair(plain[0].run, plain[1].run, replays)
        row["plain_sequential_ms_again"], row["plain_streams_ms_again"] = again
    base = row["plain_sequential_ms"]
    row["plain_streams_speedup"] = base / row["plain_streams_ms"]
    row["compiled_sequential_speedup"] = base / row["compiled_sequential_ms"]
    row["compiled_streams_speedup"] = base / row["compiled_streams_ms"]
    row["compiled_streams_over_compiled_sequential"] = row["compiled_sequential_ms"] / row["compiled_streams_ms"]
    return row


def training(archs: list[str], batch: int, compiled: bool, seed: int, steps: int, warm_up: int) -> dict:
    rows_total = batch * 8
    g = torch.Generator().manual_seed(0)
    x = torch.randn(rows_total, 3, 32, 32, generator=g).cuda()
    y = torch.randint(0, 10, (rows_total,), generator=g).cuda()
    total = 2 * (warm_up + steps) + 8
    order = [torch.randperm(rows_total, generator=g)[:batch].cuda() for _ in range(total)]
    rates = cosine_rates(0.05, total)
    units = []
    t0 = time.perf_counter()
    for model in networks(archs, seed):
        model = model.cuda().to(memory_format=torch.channels_last).train()
        units.append(TrainingStep(model, lambda t: t.contiguous(memory_format=torch.channels_last), x, y, batch,
                                  rates, 0.9, 5e-4, torch.bfloat16, graph=True, compiled=compiled))
    for unit in units:  # all exist first, so that their compile children work side by side
        unit.run(0, order[0])  # captures (compiling first where asked)
    torch.cuda.synchronize()
    row = {"part": "training", "candidates": len(archs), "batch": batch, "mode": "compiled" if compiled else "plain",
           "prepare_s_per_candidate": (time.perf_counter() - t0) / len(archs)}
    step = [1]

    def alone(unit):
        def one():
            unit.run(step[0] % total, order[step[0] % total])
            step[0] += 1
        return one

    def round_():
        for unit in units:
            unit.run(step[0] % total, order[step[0] % total])
        step[0] += 1

    def joined(fn, streams):
        def call():
            fn()
            for s in streams:
                torch.cuda.current_stream().wait_stream(s)
        return call

    ms_alone = []
    for unit in units:
        fn = joined(alone(unit), [unit.stream])
        for _ in range(warm_up):
            fn()
        ms_alone.append(events_ms(fn, steps, windows=3))
    fn = joined(round_, [u.stream for u in units])
    for _ in range(warm_up):
        fn()
    ms_round = events_ms(fn, steps, windows=3)
    row["alone_ms_per_step"] = sum(ms_alone) / len(ms_alone)
    row["together_ms_per_candidate_step"] = ms_round / len(units)
    row["alone_steps_per_s"] = 1e3 / row["alone_ms_per_step"]
    row["together_steps_per_s"] = 1e3 / row["together_ms_per_candidate_step"]
    row["final_losses"] = [u.take_loss(step[0]) for u in units]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=16)
    parser.add_argument("--plan", nargs="+", default=["inference:256", "inference:1", "training:256", "inference:32",
                                                      "training:64"],
                        help="stages in order, PART:BATCH[:max-autotune] (inference's Inductor mode)")
    parser.add_argument("--train-candidates", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warm-up", type=int, default=5)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=520.0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.benchmark = False
    space = get_space("nb201")
    archs = [a.to_string() for a in space.sample_many(args.cells, seed=args.seed)]
    train_archs = [a.to_string() for a in space.sample_many(args.train_candidates, seed=args.seed + args.train_candidates)]
    stages = []
    for item in args.plan:
        part, batch, *mode = item.split(":")
        if part == "inference":
            stages.append((part, int(batch), mode[0] if mode else "default"))
        else:
            stages += [(part, int(batch), False), (part, int(batch), True)]
    start, rows = time.perf_counter(), []
    log = args.out / "compiled_candidates.jsonl"
    for part, batch, how in stages:
        if time.perf_counter() - start > args.budget_s:
            print(f"budget spent: {part} batch {batch} {how} not run", flush=True)
            continue
        with many_networks():  # every cell is a recompilation of one forward: keep them all, or fail
            if part == "inference":
                row = inference(archs, batch, how, args.seed, args.replays)
            else:
                row = training(train_archs, batch, how, args.seed, args.steps, args.warm_up)
        row["elapsed_s"] = time.perf_counter() - start
        rows.append(row)
        with log.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cells": archs,
               "train_cells": train_archs, "rows": rows}
    (args.out / "compiled_candidates.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
