"""Measure the candidates that predictor accuracy is judged on: sampled archs of each space at each
(batch size, mode), fp16, with the survey timing (5 windows of >= 2 ms, no counters).

    python benchmarks/predictor_data.py --spaces nb201:900,mbconv:400 --batch-sizes 256,1 \
        --modes cudagraph,eager --workers 6 --out benchmarks/results/h200

Appends one CSV per space (`predictor_data_<space>.csv`, one row per measurement) so a run cut short
keeps what it finished. The archs are the same for every configuration (seeded), which lets the
accuracy benchmark hold out the same candidates everywhere.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from nasutil import get_space
from nasutil.evaluator import Candidate, Evaluator, MeasureConfig

FIELDS = ("space", "arch", "status", "device_name", "dtype", "batch_size", "mode", "input_size", "latency_ms",
          "latency_cv", "throughput_per_s", "utilization", "flops_per_image", "params", "sm_clock_mhz",
          "driver_version", "torch_version", "error")


def sampled(space_name: str, n: int, seed: int) -> list[str]:
    return [a.to_string() for a in get_space(space_name).sample_many(n, seed)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spaces", default="nb201:900,mbconv:400", help="NAME:COUNT,...")
    parser.add_argument("--batch-sizes", default="256,1")
    parser.add_argument("--modes", default="cudagraph,eager")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip", type=int, default=0, help="leave out the first SKIP sampled archs")
    parser.add_argument("--per-arch", action="store_true",
                        help="one process measures every configuration of an arch before the next arch, so the "
                             "library's one-off work per new layer shape is paid once per batch size, not per "
                             "configuration")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    base = MeasureConfig(device=args.device, dtype="fp16" if args.device.startswith("cuda") else "fp32",
                         mode="cudagraph" if args.device.startswith("cuda") else "eager",
                         counters=False, warmup=2, repeats=5, min_window_ms=2.0)
    for item in args.spaces.split(","):
        name, _, count = item.partition(":")
        archs = sampled(name, int(count), args.seed)[args.skip:]
        path = args.out / f"predictor_data_{name}.csv"
        new = not path.exists()
        with path.open("a", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
            if new:
                writer.writeheader()
            if args.per_arch:
                configs = [base.with_(batch_size=int(b), mode=m) for b in args.batch_sizes.split(",")
                           for m in args.modes.split(",")]
                with Evaluator(configs[0], isolate=False) as evaluator:
                    for arch in archs:
                        for config in configs:
                            writer.writerow(evaluator.measure(Candidate(name, arch), config).to_dict(with_layers=False))
                        fh.flush()
                continue
            for batch in map(int, args.batch_sizes.split(",")):
                for mode in args.modes.split(","):
                    config = base.with_(batch_size=batch, mode=mode)
                    started = time.perf_counter()
                    ok = 0
                    with Evaluator(config, workers=args.workers, timeout_s=120) as evaluator:
                        for m in evaluator.measure_many([Candidate(name, a) for a in archs]):
                            writer.writerow(m.to_dict(with_layers=False))
                            ok += m.ok
                    fh.flush()
                    print(f"{name} b{batch} {mode}: {ok}/{len(archs)} ok in {time.perf_counter() - started:.0f} s",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
