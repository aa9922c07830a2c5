"""Time-only against space-time multiplexing on one GPU, and packing groups by predicted latency.

    python experiments/colocation/run.py --out experiments/colocation/results

1. Opportunity gap. Two groups: 16 sampled NAS-Bench-201 cells (32x32 inputs) and six torchvision CNNs
   (224x224). For batch 1, 2, 4, ... 256 per network, `measure_group` runs the group by `streams` (every
   network on its own stream in one CUDA graph: space-time) and by `sequential` (each network's own graph,
   one after another: time-only), alternating, fp16. Under a latency SLO each way serves the largest batch
   whose group latency stays within it; the gap is the ratio of the images per second they serve.
   Each row is checked against a reference written here: the same networks built and captured by this
   script (one graph each, replayed back to back; and one graph with a stream per network), timed with
   CUDA events. The nb201 group is also run by `fused` (the cells as one network, one kernel per layer).
2. Packing. 64 sampled cells, groups of 8, batch 1 and 32: groups of similar predicted latency
   (`nasutil.colocate.packing`) against random groups of the same size (three draws), each group run by
   `streams`; the time to run every candidate once is the sum of the groups' latencies.

Writes opportunity.csv and packing.csv; `analyze.py` turns them into the README's figures and plot.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

import torch

from nasutil import get_space
from nasutil.colocate import measure_group
from nasutil.colocate.packing import pack_by_latency, random_groups
from nasutil.evaluator import Candidate, MeasureConfig
from nasutil.predictor.registry import DEFAULT_PROFILE, make_predictor

TORCHVISION = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x1_0", "squeezenet1_1"]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def _network(candidate: Candidate) -> tuple[torch.nn.Module, int]:
    """The network and its input size, built directly (torchvision's own constructor for its models)."""
    if candidate.space == "torchvision":
        import torchvision

        return getattr(torchvision.models, candidate.arch)(), 224
    space = get_space(candidate.space)
    return space.build(space.parse(candidate.arch), num_classes=10), 32


def events_ms(fn, replays: int = 10, windows: int = 5) -> float:
    """The median over `windows` of `fn`'s time per call, `replays` calls a window, by CUDA events."""
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


def reference(candidates: list[Candidate], batch: int, replays: int = 10) -> dict:
    """Both ways captured and timed here, independently of nasutil.colocate: each network's own graph
    replayed back to back, and one graph holding every network on its own stream (also the reference of
    `benchmarks/colocate_bench.py`)."""
    models, inputs = [], []
    for c in candidates:
        model, size = _network(c)
        models.append(model.eval().cuda().half().to(memory_format=torch.channels_last))
        inputs.append(torch.randn(batch, 3, size, size, device="cuda", dtype=torch.half)
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
        sequential = [events_ms(one_by_one, replays), events_ms(together.replay, replays),
                      events_ms(one_by_one, replays)]
    return {"reference_sequential_ms": (sequential[0] + sequential[2]) / 2, "reference_streams_ms": sequential[1]}


def opportunity(rows: list[dict], label: str, candidates: list[Candidate], batches: list[int], out: Path,
                fused: bool = False) -> None:
    for batch in batches:
        config = MeasureConfig(device="cuda", dtype="fp16", batch_size=batch, counters=False)
        m = measure_group(candidates, config, "streams", fallback=False)
        row = {"group": label, "networks": len(candidates), "batch": batch, "streams_ms": m.latency_ms,
               "sequential_ms": m.sequential_latency_ms, "speedup": m.speedup,
               "streams_images_per_s": m.throughput_per_s,
               "sequential_images_per_s": len(candidates) * batch / (m.sequential_latency_ms * 1e-3),
               "utilization": m.utilization, "sm_clock_mhz": m.sm_clock_mhz, "fused_ms": None,
               "fused_sequential_ms": None}
        if fused:
            f = measure_group(candidates, config, "fused", fallback=False)
            row.update(fused_ms=f.latency_ms, fused_sequential_ms=f.sequential_latency_ms)
        row.update(reference(candidates, batch))
        torch.cuda.empty_cache()
        rows.append(row)
        print(row, flush=True)
        write(out, rows)


def packing(rows: list[dict], count: int, size: int, batches: list[int], draws: int, seed: int, out: Path) -> None:
    archs = [a.to_string() for a in get_space("nb201").sample_many(count, seed=seed)]
    predictor = make_predictor("auto", profile=DEFAULT_PROFILE)
    for batch in batches:
        latency = [p.latency_ms for p in predictor.predict_many("nb201", archs, predictor.target("fp16", batch))]
        ways = {"packed": pack_by_latency(latency, size)}
        ways.update({f"random{d}": random_groups(count, size, seed=seed + d) for d in range(draws)})
        config = MeasureConfig(device="cuda", dtype="fp16", batch_size=batch, counters=False)
        for way, groups in ways.items():
            for number, group in enumerate(groups):
                m = measure_group([Candidate("nb201", archs[i]) for i in group.members], config, "streams",
                                  fallback=False)
                row = {"way": way, "batch": batch, "group": number, "members": len(group.members),
                       "predicted_slowest_ms": max(latency[i] for i in group.members),
                       "streams_ms": m.latency_ms, "sequential_ms": m.sequential_latency_ms,
                       "sm_clock_mhz": m.sm_clock_mhz}
                rows.append(row)
            write(out, rows)
            total = sum(r["streams_ms"] for r in rows if r["way"] == way and r["batch"] == batch)
            print(f"packing batch {batch} {way}: every candidate once in {total:.3f} ms", flush=True)


def write(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    cells = [Candidate("nb201", a.to_string()) for a in get_space("nb201").sample_many(16, seed=args.seed)]
    opportunity(rows, "nb201", cells, BATCHES, args.out / "opportunity.csv", fused=True)
    opportunity(rows, "torchvision", [Candidate("torchvision", name) for name in TORCHVISION], BATCHES,
                args.out / "opportunity.csv")
    packed: list[dict] = []
    packing(packed, 64, 8, [1, 32], draws=3, seed=args.seed, out=args.out / "packing.csv")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
