"""Co-located inference: groups of NAS-Bench-201 cells run together against the same cells one after
another, each from its own CUDA graph.

    python benchmarks/colocate_bench.py --out benchmarks/results/h200/colocate

For each group size and batch size, `nasutil.colocate.measure_group` runs the group by a strategy and by
`sequential` in the same process, alternating. Checked in the same run against a plain reference, the one
`experiments/colocation/run.py` uses: the same networks built and their CUDA graphs captured there,
independently of nasutil.colocate, replayed back to back and in one graph of one stream per network,
timed with CUDA events. A strategy other than `streams` (`fused`), and any compiled group, is timed a
second way too: its prepared group replayed under CUDA events (`events_ms`), and its outputs are
compared with each network's own (`max_rel_error`, relative to the largest logit). `--connections N`
repeats the group sizes in a child process with CUDA_DEVICE_MAX_CONNECTIONS=N (the number of hardware
queues that streams map onto; 8 by default). `--compile` compiles every network by Inductor first
(`measure_group`'s mode "compile"): the row then holds the compiled sequential time, and the uncompiled
one beside it (`plain_sequential_ms`, `speedup_over_plain`). Compiled networks keep their weights as
inputs (`--plain-weights`, the default, faster to compile); `--frozen-weights` folds them in. Writes
NAME.json and NAME.csv, and NAME.jsonl row by row as it goes (`--name`, default colocate_bench).
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from nasutil import get_space
from nasutil.colocate import measure_group
from nasutil.evaluator import Candidate, MeasureConfig


def _colocation_experiment():
    """experiments/colocation/run.py, whose plain reference (its own capture and CUDA-event clock) this
    benchmark shares."""
    path = Path(__file__).resolve().parents[1] / "experiments" / "colocation" / "run.py"
    spec = importlib.util.spec_from_file_location("colocation_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXPERIMENT = _colocation_experiment()
events_ms = EXPERIMENT.events_ms


def reference(archs: list[str], batch: int) -> dict:
    """The same group, built and captured by the reference: sequential graphs and one graph of one stream each."""
    ref = EXPERIMENT.reference([Candidate("nb201", a) for a in archs], batch, replays=20)
    sequential, streams = ref["reference_sequential_ms"], ref["reference_streams_ms"]
    return {"sequential_ms": sequential, "streams_ms": streams, "speedup": sequential / streams}


def second_look(archs: list[str], batch: int, strategy: str, compiled: bool = False, freezing: bool = False) -> dict:
    """The strategy's group prepared by `colocate`, timed with CUDA events, and its outputs against each
    network run alone (fp16)."""
    from nasutil.colocate import colocate

    space = get_space("nb201")
    torch.manual_seed(0)
    models = [space.build(space.parse(a), num_classes=10, input_size=32).eval().cuda().half()
              .to(memory_format=torch.channels_last) for a in archs]
    inputs = [torch.randn(batch, 3, 32, 32, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
              for _ in archs]
    with torch.inference_mode():
        group = colocate(models, inputs, strategy, fallback=False, compiled=compiled, freezing=freezing)
        outputs = [o.float().clone() for o in group.run()]
        alone = [m(x).float() for m, x in zip(models, inputs)]
        error = max(float((o - a).abs().max() / a.abs().max().clamp_min(1e-6)) for o, a in zip(outputs, alone))
        for _ in range(3):
            group.run()
        ms = events_ms(group.run, 20)
    return {"events_ms": ms, "max_rel_error": error}


def run(groups: list[int], batches: list[int], strategies: list[str], seed: int, log: Path | None = None,
        compiled: bool = False, freezing: bool = False) -> list[dict]:
    rows = []
    for size in groups:
        archs = [a.to_string() for a in get_space("nb201").sample_many(size, seed=seed)]
        for batch in batches:
            config = MeasureConfig(device="cuda", dtype="fp16", batch_size=batch, counters=False,
                                   mode="compile" if compiled else "cudagraph")
            ref = reference(archs, batch)
            for strategy in strategies:
                m = measure_group([Candidate("nb201", a) for a in archs], config, strategy, freezing=freezing)
                row = {"networks": size, "batch": batch, "requested": strategy, "strategy": m.strategy,
                       "fallback_reason": m.fallback_reason, "latency_ms": m.latency_ms,
                       "sequential_latency_ms": m.sequential_latency_ms, "speedup": m.speedup,
                       "images_per_s": m.throughput_per_s, "utilization": m.utilization,
                       "sm_clock_mhz": m.sm_clock_mhz, "reference_sequential_ms": ref["sequential_ms"],
                       "reference_streams_ms": ref["streams_ms"], "reference_speedup": ref["speedup"],
                       "connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "default"),
                       "events_ms": None, "max_rel_error": None, "compiled": m.compiled, "compile_s": m.compile_s,
                       "plain_sequential_ms": m.plain_sequential_latency_ms, "speedup_over_plain": m.speedup_over_plain,
                       "compiled_frozen": m.compiled_frozen}
                if (strategy != "streams" or compiled) and m.strategy == strategy:
                    row.update(second_look(archs, batch, strategy, compiled, freezing))
                rows.append(row)
                print(json.dumps(row), flush=True)
                if log is not None:
                    with log.open("a") as fh:
                        fh.write(json.dumps(row) + "\n")
            torch.cuda.empty_cache()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32, 256])
    parser.add_argument("--strategies", nargs="+", default=["streams"])
    parser.add_argument("--connections", type=int, nargs="*", default=[32])
    parser.add_argument("--compile", action="store_true",
                        help="networks compiled by Inductor first (measure_group's mode 'compile')")
    weights = parser.add_mutually_exclusive_group()
    weights.add_argument("--plain-weights", dest="frozen_weights", action="store_false",
                         help="with --compile: the weights stay the compiled networks' inputs (the default)")
    weights.add_argument("--frozen-weights", action="store_true",
                         help="with --compile: the weights folded into the compiled networks (BatchNorm folded too)")
    parser.add_argument("--name", default="colocate_bench", help="the result files' name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = run(args.groups, args.batches, args.strategies, args.seed,
               log=None if args.child else args.out / f"{args.name}.jsonl", compiled=args.compile,
               freezing=args.frozen_weights)
    if args.child:
        print("ROWS " + json.dumps(rows))
        return 0
    for n in args.connections:
        env = {**os.environ, "CUDA_DEVICE_MAX_CONNECTIONS": str(n)}
        cmd = [sys.executable, __file__, "--child", "--out", str(args.out), "--seed", str(args.seed),
               "--groups", *map(str, args.groups), "--batches", *map(str, args.batches),
               "--strategies", *args.strategies, *(["--compile"] if args.compile else []),
               *(["--frozen-weights"] if args.frozen_weights else [])]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        child = json.loads(next(line[5:] for line in out.splitlines() if line.startswith("ROWS ")))
        for row in child:
            print(json.dumps(row), flush=True)
        rows += child
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    (args.out / f"{args.name}.json").write_text(json.dumps(summary, indent=1))
    with (args.out / f"{args.name}.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
