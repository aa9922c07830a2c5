"""Predict H200 latency, throughput and utilization of all 15,625 NAS-Bench-201 cells once.

The shipped `h200` profile's learned model (fp16, batch 256, CUDA graph) scores every cell; the
result, `predicted_h200.csv`, is what the pruning experiment reads instead of predicting again.
Rows are appended as they arrive, so an interrupted run resumes where it stopped.

    python experiments/nb201_pruning/predict_all.py --workers 2
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COLUMNS = ("arch", "predictor", "latency_ms", "throughput_per_s", "utilization", "flops_per_image", "params")

_state: dict = {}


def _init(profile: str) -> None:
    import torch

    from nasutil.predictor.prediction import PredictTarget
    from nasutil.predictor.profile import load_profile
    from nasutil.registry import get_space

    torch.set_num_threads(1)
    loaded = load_profile(profile)
    _state.update(space=get_space("nb201"), profile=loaded,
                  target=PredictTarget(loaded.device_name, "fp16", 256, "cudagraph"))


def _predict_chunk(archs: list[str]) -> list[dict]:
    from nasutil.predictor import fit
    from nasutil.search.predictors import count_params_of

    space, profile, target = _state["space"], _state["profile"], _state["target"]
    if hasattr(fit, "ProfilePredictor"):  # batched: one pass of the learned model for the whole chunk
        predictions = fit.ProfilePredictor(profile).predict_many(space, "nb201", archs, target)
    else:
        predictions = [fit.predict(space, "nb201", a, profile, target) for a in archs]
    return [{"arch": p.arch, "predictor": p.predictor, "latency_ms": f"{p.latency_ms:.6g}",
             "throughput_per_s": f"{p.throughput_per_s:.6g}", "utilization": f"{p.utilization:.6g}",
             "flops_per_image": p.flops_per_image, "params": count_params_of(space, p.arch)} for p in predictions]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", default="h200")
    parser.add_argument("--out", type=Path, default=HERE / "predicted_h200.csv")
    args = parser.parse_args()

    from nasutil.registry import get_space

    every = [a.to_string() for a in get_space("nb201").enumerate()]
    done: set[str] = set()
    if args.out.exists():
        with args.out.open() as f:
            done = {row["arch"] for row in csv.DictReader(f)}
    todo = [a for a in every if a not in done]
    print(f"{len(done)} cells already predicted, {len(todo)} to go", file=sys.stderr)
    start = time.perf_counter()
    new_file = not args.out.exists() or not done
    with args.out.open("w" if new_file else "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        if new_file:
            writer.writeheader()
        with mp.get_context("spawn").Pool(args.workers, initializer=_init, initargs=(args.profile,)) as pool:
            chunks = [todo[i:i + 250] for i in range(0, len(todo), 250)]
            n = 0
            for rows in pool.imap(_predict_chunk, chunks):
                writer.writerows(rows)
                f.flush()
                n += len(rows)
                print(f"{n}/{len(todo)} ({n / (time.perf_counter() - start):.1f} cells/s)", file=sys.stderr)
    print(f"done in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
