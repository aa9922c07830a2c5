"""Predict H200 latency, throughput and utilization of all 15,625 NAS-Bench-201 cells once.

The shipped `h200` profile's `auto` choice (its learned model at fp16, batch 256, CUDA graph) scores
every cell; the result, `results/predicted_h200.csv`, is what the pruning experiment reads instead
of predicting again. Rows are appended as they arrive, so an interrupted run resumes where it
stopped; an existing table keeps its own columns.

    python experiments/nb201_pruning/predict_all.py --workers 2
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import sys
import time
from pathlib import Path

from nasutil import get_space
from nasutil.errors import fail
from nasutil.predictor.kinds.table import COLUMNS, table_row

HERE = Path(__file__).resolve().parent
CHUNK = 250

_state: dict = {}


def _init(profile: str) -> None:
    import torch

    from nasutil.predictor import make_predictor

    torch.set_num_threads(1)
    predictor = make_predictor("auto", profile=profile)
    _state.update(predictor=predictor, target=predictor.target("fp16", 256, "cudagraph"))


def _predict_chunk(archs: list[str]) -> list[dict]:
    """Table rows of a chunk of cells (the learned model scores the whole chunk in one pass)."""
    return [table_row(p) for p in _state["predictor"].predict_many("nb201", archs, _state["target"])]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--profile", default="h200")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "predicted_h200.csv")
    args = parser.parse_args()

    every = [a.to_string() for a in get_space("nb201").enumerate()]
    columns, done = list(COLUMNS), set()
    if args.out.exists() and args.out.stat().st_size:
        with args.out.open(newline="") as f:
            reader = csv.DictReader(f)
            if "arch" not in (reader.fieldnames or []):
                fail(f"error: {args.out} is not a prediction table (it has no arch column)")
            columns = list(reader.fieldnames)  # resume in the table's own columns
            done = {row["arch"] for row in reader}
    todo = [a for a in every if a not in done]
    print(f"{len(done)} cells already predicted, {len(todo)} to go", file=sys.stderr)
    if not todo:
        return 0
    start = time.perf_counter()
    new_file = not done
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w" if new_file else "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        if new_file:
            writer.writeheader()
        with mp.get_context("spawn").Pool(args.workers, initializer=_init, initargs=(args.profile,)) as pool:
            chunks = [todo[i:i + CHUNK] for i in range(0, len(todo), CHUNK)]
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
