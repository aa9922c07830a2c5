"""A candidate's first eager steps and first validation in a fresh thread against a thread that has run others.

    python benchmarks/thread_caches.py --cells 8 --seed 7 --out OUT

PyTorch keeps cuDNN's execution plans in a cache per thread (`thread_local` in its cuDNN v8 convolution code), so
a thread that meets a convolution shape for the first time builds the plan, even where another thread built it
before. A population's host work runs in its trials' threads, many of them new to every shape; one at a time
runs every candidate in one thread. For `--cells` pairs of NAS-Bench-201 cells (drawn with `--seed`), built and
moved to the device as the trainer does, this times, on a quiet device, each cell's first and second eager
training step (`TrainingStep`'s own arithmetic, the trainer's warm-up) and its first validation on the
validation split (`TorchTrainer._correct`, forwards of 1,024 and the split's last 880 images), the first cell of a
pair in a thread started for it (`fresh`), the second in one thread that runs every second cell (`reused`, warmed
first by a cell of its own). Every time is the host's wall clock to the device's end (a synchronize), so it
holds what the device did as well as what the host did. The second step is the reference: it runs with
every plan built in both arms, so the arms' first steps differ by what a fresh thread rebuilds, not by the cells.
Writes thread_caches.json (a row per cell and the medians).
"""

from __future__ import annotations

import argparse
import json
import queue
import statistics
import threading
import time
from pathlib import Path

import torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=8, help="pairs of cells: one timed in a fresh thread, one reused")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.cells < 1 or args.batch_size < 1:
        parser.exit(2, "thread_caches.py: error: --cells and --batch-size must be whole numbers >= 1\n")
    if not torch.cuda.is_available():
        parser.exit(2, "thread_caches.py: error: needs a CUDA device\n")

    import numpy as np

    from nasutil.colocate.training_step import TrainingStep, cosine_rates
    from nasutil.colocate.transfer import move_to_device
    from nasutil.registry import get_space
    from nasutil.search.trainers.torch_trainer import TorchTrainer

    trainer = TorchTrainer(dataset="fashion_mnist", data_dir=args.data_dir, epochs=1, batch_size=args.batch_size,
                           device="cuda")
    data = trainer._load()
    space = get_space("nb201")
    rng = np.random.default_rng(args.seed)
    cells = [space.sample(rng) for _ in range(2 * args.cells + 1)]
    train_x, train_y = data["train"]

    def timed(fn) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return 1e3 * (time.perf_counter() - start)

    def one(arch, index: int) -> dict:
        torch.manual_seed(args.seed * 1000 + index)
        model = space.build(arch, num_classes=data["num_classes"], input_size=data["input_size"])
        model = move_to_device(model, trainer.device, channels_last=trainer.channels_last)
        step = TrainingStep(model, lambda x: trainer._inputs(x, space.in_channels), train_x, train_y, args.batch_size,
                            cosine_rates(trainer.lr, 100), trainer.momentum, trainer.weight_decay, torch.bfloat16,
                            graph=False, stream=torch.cuda.current_stream())
        first = timed(step._compute)
        second = timed(step._compute)
        valid = timed(lambda: trainer._correct(model, data["valid"], space.in_channels))
        again = timed(lambda: trainer._correct(model, data["valid"], space.in_channels))
        return {"cell": arch.to_string(), "first_step_ms": round(first, 2), "second_step_ms": round(second, 2),
                "first_validation_ms": round(valid, 2), "second_validation_ms": round(again, 2)}

    def in_thread(fn):
        out: dict = {}
        thread = threading.Thread(target=lambda: out.update(fn()))
        thread.start()
        thread.join()
        return out

    jobs: queue.Queue = queue.Queue()
    answers: queue.Queue = queue.Queue()

    def reused_thread() -> None:
        answers.put(one(cells[0], 0))  # its own warm-up: every shape of these networks seen once in this thread
        while (index := jobs.get()) is not None:
            answers.put(one(cells[index], index))

    worker = threading.Thread(target=reused_thread, daemon=True)
    worker.start()
    answers.get()
    rows = []
    for pair in range(args.cells):
        fresh_index, reused_index = 1 + 2 * pair, 2 + 2 * pair
        order = ("fresh", "reused") if pair % 2 == 0 else ("reused", "fresh")  # alternated from pair to pair
        for arm in order:
            if arm == "fresh":
                row = in_thread(lambda: one(cells[fresh_index], fresh_index))
            else:
                jobs.put(reused_index)
                row = answers.get()
            rows.append({"arm": arm, **row})
            print(json.dumps(rows[-1]), flush=True)
    jobs.put(None)
    worker.join()
    keys = ["first_step_ms", "second_step_ms", "first_validation_ms", "second_validation_ms"]
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "batch_size": args.batch_size,
               "cells": args.cells, "seed": args.seed,
               "medians": {arm: {k: statistics.median(r[k] for r in rows if r["arm"] == arm) for k in keys}
                           for arm in ("fresh", "reused")}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "thread_caches.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
