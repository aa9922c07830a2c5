"""Time-only against space-time multiplexing on one GPU, and packing groups by predicted latency.

    python experiments/colocation/run.py --out experiments/colocation/results

1. Opportunity gap. Two groups: 16 sampled NAS-Bench-201 cells (32x32 inputs) and six torchvision CNNs
   (224x224). For batch 1, 2, 4, ... 256 per network, `measure_group` runs the group by `streams` (every
   network on its own stream in one CUDA graph: space-time) and by `sequential` (each network's own graph,
   one after another: time-only), alternating, fp16. Under a latency SLO each way serves the largest batch
   whose group latency stays within it; the gap is the ratio of the images per second they serve.
2. Packing. 64 sampled cells, groups of 8, batch 1 and 32: groups of similar predicted latency
   (`nasutil.colocate.packing`) against random groups of the same size (three draws), each group run by
   `streams`; the time to run every candidate once is the sum of the groups' latencies.

Writes opportunity.csv and packing.csv; `analyze.py` turns them into the README's figures and plot.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from nasutil import get_space
from nasutil.colocate import measure_group
from nasutil.colocate.packing import pack_by_latency, random_groups
from nasutil.evaluator import Candidate, MeasureConfig
from nasutil.predictor.registry import DEFAULT_PROFILE, make_predictor

TORCHVISION = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "shufflenet_v2_x1_0", "squeezenet1_1"]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def opportunity(rows: list[dict], label: str, candidates: list[Candidate], batches: list[int]) -> None:
    for batch in batches:
        m = measure_group(candidates, MeasureConfig(device="cuda", dtype="fp16", batch_size=batch, counters=False),
                          "streams", fallback=False)
        row = {"group": label, "networks": len(candidates), "batch": batch, "streams_ms": m.latency_ms,
               "sequential_ms": m.sequential_latency_ms, "speedup": m.speedup,
               "streams_images_per_s": m.throughput_per_s,
               "sequential_images_per_s": len(candidates) * batch / (m.sequential_latency_ms * 1e-3),
               "utilization": m.utilization, "sm_clock_mhz": m.sm_clock_mhz}
        rows.append(row)
        print(row, flush=True)


def packing(rows: list[dict], count: int, size: int, batches: list[int], draws: int, seed: int) -> None:
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
    opportunity(rows, "nb201", cells, BATCHES)
    opportunity(rows, "torchvision", [Candidate("torchvision", name) for name in TORCHVISION], BATCHES)
    write(args.out / "opportunity.csv", rows)
    packed: list[dict] = []
    packing(packed, 64, 8, [1, 32], draws=3, seed=args.seed)
    write(args.out / "packing.csv", packed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
