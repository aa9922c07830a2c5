"""Co-located inference: groups of NAS-Bench-201 cells run together against the same cells one after
another, each from its own CUDA graph.

    python benchmarks/colocate_bench.py --out benchmarks/results/h200/colocate

For each group size and batch size, `nasutil.colocate.measure_group` runs the group by a strategy and by
`sequential` in the same process, alternating. Checked in the same run against a plain reference written
here: the same networks' CUDA graphs captured by this script, replayed back to back and in one graph of
one stream per network, timed with CUDA events. A strategy other than `streams` (`fused`) is timed a
second way too: its prepared group replayed under CUDA events (`events_ms`), and its outputs are
compared with each network's own (`max_rel_error`, relative to the largest logit). `--connections N`
repeats the group sizes in a child process with CUDA_DEVICE_MAX_CONNECTIONS=N (the number of hardware
queues that streams map onto; 8 by default). Writes NAME.json and NAME.csv, and NAME.jsonl row by row as
it goes (`--name`, default colocate_bench).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from nasutil import get_space
from nasutil.colocate import measure_group
from nasutil.evaluator import Candidate, MeasureConfig


def _events_ms(fn, replays: int = 20, windows: int = 5) -> float:
    times = []
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / replays)
    return statistics.median(times)


def reference(archs: list[str], batch: int) -> dict:
    """The same group, built and captured here: sequential graphs and one graph of one stream each."""
    space = get_space("nb201")
    models, inputs = [], []
    for arch in archs:
        m = space.build(space.parse(arch), num_classes=10, input_size=32).eval()
        models.append(m.cuda().half().to(memory_format=torch.channels_last))
        inputs.append(torch.randn(batch, 3, 32, 32, device="cuda", dtype=torch.half)
                      .contiguous(memory_format=torch.channels_last))
    with torch.inference_mode():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for m, x in zip(models, inputs):
                m(x), m(x)
        torch.cuda.current_stream().wait_stream(side)
        graphs = []
        for m, x in zip(models, inputs):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                m(x)
            graphs.append(g)
        streams = [torch.cuda.Stream() for _ in models]
        together = torch.cuda.CUDAGraph()
        with torch.cuda.graph(together):
            main = torch.cuda.current_stream()
            for s in streams:
                s.wait_stream(main)
            for s, m, x in zip(streams, models, inputs):
                with torch.cuda.stream(s):
                    m(x)
            for s in streams:
                main.wait_stream(s)
        torch.cuda.synchronize()

        def one_by_one() -> None:
            for g in graphs:
                g.replay()

        for _ in range(3):
            one_by_one()
            together.replay()
        sequential_ms = _events_ms(one_by_one)
        streams_ms = _events_ms(together.replay)
        sequential_after = _events_ms(one_by_one)
    return {"sequential_ms": (sequential_ms + sequential_after) / 2, "streams_ms": streams_ms,
            "speedup": (sequential_ms + sequential_after) / 2 / streams_ms}


def second_look(archs: list[str], batch: int, strategy: str) -> dict:
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
        group = colocate(models, inputs, strategy, fallback=False)
        outputs = [o.float().clone() for o in group.run()]
        alone = [m(x).float() for m, x in zip(models, inputs)]
        error = max(float((o - a).abs().max() / a.abs().max().clamp_min(1e-6)) for o, a in zip(outputs, alone))
        for _ in range(3):
            group.run()
        ms = _events_ms(group.run)
    return {"events_ms": ms, "max_rel_error": error}


def run(groups: list[int], batches: list[int], strategies: list[str], seed: int, log: Path | None = None) -> list[dict]:
    rows = []
    for size in groups:
        archs = [a.to_string() for a in get_space("nb201").sample_many(size, seed=seed)]
        for batch in batches:
            config = MeasureConfig(device="cuda", dtype="fp16", batch_size=batch, counters=False)
            ref = reference(archs, batch)
            for strategy in strategies:
                m = measure_group([Candidate("nb201", a) for a in archs], config, strategy)
                row = {"networks": size, "batch": batch, "requested": strategy, "strategy": m.strategy,
                       "fallback_reason": m.fallback_reason, "latency_ms": m.latency_ms,
                       "sequential_latency_ms": m.sequential_latency_ms, "speedup": m.speedup,
                       "images_per_s": m.throughput_per_s, "utilization": m.utilization,
                       "sm_clock_mhz": m.sm_clock_mhz, "reference_sequential_ms": ref["sequential_ms"],
                       "reference_streams_ms": ref["streams_ms"], "reference_speedup": ref["speedup"],
                       "connections": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "default"),
                       "events_ms": None, "max_rel_error": None}
                if strategy != "streams" and m.strategy == strategy:
                    row.update(second_look(archs, batch, strategy))
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
    parser.add_argument("--name", default="colocate_bench", help="the result files' name")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = run(args.groups, args.batches, args.strategies, args.seed,
               log=None if args.child else args.out / f"{args.name}.jsonl")
    if args.child:
        print("ROWS " + json.dumps(rows))
        return 0
    for n in args.connections:
        env = {**os.environ, "CUDA_DEVICE_MAX_CONNECTIONS": str(n)}
        cmd = [sys.executable, __file__, "--child", "--out", str(args.out), "--seed", str(args.seed),
               "--groups", *map(str, args.groups), "--batches", *map(str, args.batches),
               "--strategies", *args.strategies]
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
