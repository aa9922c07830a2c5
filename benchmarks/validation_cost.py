"""What a candidate's validation and test cost the trainer, eager and as one captured CUDA graph.

    python benchmarks/validation_cost.py --cells 8 --seed 5 --out OUT

The torch trainer counts a trained candidate's correct predictions on the validation split (and on the
test split after its last step) with eager forwards of `trainer.eval_batch` images (1,024 by default), queued on the device and read
once. For each of `--cells` NAS-Bench-201 cells (drawn with `--seed`), built and moved to the device as the
trainer does, this times that count several ways on the validation and test splits together (16,000
Fashion-MNIST images):

- `eager`: `TorchTrainer._correct`, as the trainer runs it: the host's time to queue it (`launch_ms`) and
  until the device has finished (`total_ms`), the third of three runs (the first pays cuDNN's choices);
- `graph`: the same forwards captured once in a CUDA graph reading the splits where they lie, then
  replayed (`capture_ms` once, `replay_ms` the median of five replays);
- `eager_at`: `_correct` again with each of `--eval-batches` images a forward (fewer, larger forwards;
  `peak_mib` the most the process held on the device meanwhile);
- `plain`: an independent reference, a textbook `model(x).argmax(1) == y` loop over the same splits with
  one synchronize at its end, no autocast helper of the trainer's.

All three must count the same correct predictions (`counts_agree`); the graph's count is checked against
the eager one on every cell. Writes validation_cost.json (a row per cell and the medians).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch


def timed_ms(fn) -> tuple[float, float, object]:
    """(host ms to queue, ms until the device is done, result)."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    queued = time.perf_counter()
    torch.cuda.synchronize()
    done = time.perf_counter()
    return 1e3 * (queued - start), 1e3 * (done - start), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64, help="the trainer's training batch (sets nothing here "
                                                                   "but the trainer it builds)")
    parser.add_argument("--eval-batches", type=int, nargs="+", default=[4096, 16384],
                        help="eager counts also timed at these batches (the trainer's own is always timed)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.cells < 1 or args.batch_size < 1 or min(args.eval_batches) < 1:
        parser.exit(2, "validation_cost.py: error: --cells, --batch-size and every --eval-batches must be whole "
                       "numbers >= 1\n")
    if not torch.cuda.is_available():
        parser.exit(2, "validation_cost.py: error: needs a CUDA device\n")

    from nasutil.colocate.transfer import move_to_device
    import numpy as np

    from nasutil.registry import get_space
    from nasutil.search.trainers.torch_trainer import EVAL_BATCH, TorchTrainer

    trainer = TorchTrainer(dataset="fashion_mnist", epochs=1, batch_size=args.batch_size, device="cuda")
    data = trainer._load()
    space = get_space("nb201")
    rng = np.random.default_rng(args.seed)
    splits = [data["valid"], data["test"]]
    images = sum(len(y) for _, y in splits)
    rows = []
    for index in range(args.cells):
        arch = space.sample(rng)
        text = arch.to_string()
        torch.manual_seed(args.seed * 1000 + index)
        model = space.build(arch, num_classes=data["num_classes"], input_size=data["input_size"])
        model = move_to_device(model, trainer.device, channels_last=trainer.channels_last)
        model.eval()
        channels = space.in_channels

        def eager():
            return sum(trainer._correct(model, split, channels) for split in splits)

        for _ in range(2):
            timed_ms(eager)
        launch_ms, total_ms, eager_count = timed_ms(eager)

        def plain():
            model.eval()  # the trainer's count leaves the model in training mode, whose batch norm would learn
            correct = 0
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                for x, y in splits:
                    for start in range(0, len(y), EVAL_BATCH):
                        xb = x[start:start + EVAL_BATCH].expand(-1, channels, -1, -1)
                        xb = xb.contiguous(memory_format=torch.channels_last)
                        correct = correct + (model(xb).argmax(1) == y[start:start + EVAL_BATCH]).sum()
            return correct

        plain_launch, plain_total, plain_count = timed_ms(plain)

        larger = {}
        for batch in args.eval_batches:  # the same count, fewer and larger forwards
            trainer.eval_batch = batch
            timed_ms(eager)
            b_launch, b_total, b_count = timed_ms(eager)
            larger[batch] = {"launch_ms": round(b_launch, 2), "total_ms": round(b_total, 2),
                             "agrees": int(b_count) == int(eager_count),
                             "peak_mib": round(torch.cuda.max_memory_allocated() / 2**20)}
            torch.cuda.reset_peak_memory_stats()
        trainer.eval_batch = EVAL_BATCH

        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            eager()  # a warm-up on the capturing stream (eval mode throughout: no statistic changes)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.cuda.graph(graph, stream=stream):
            graph_count = eager()
        torch.cuda.synchronize()
        capture_ms = 1e3 * (time.perf_counter() - start)
        replays = [timed_ms(graph.replay) for _ in range(5)]
        replay_ms = statistics.median(r[1] for r in replays)
        replay_launch = statistics.median(r[0] for r in replays)
        counts = (int(eager_count), int(plain_count), int(graph_count))
        rows.append({"cell": text, "eager_launch_ms": round(launch_ms, 2), "eager_total_ms": round(total_ms, 2),
                     "plain_launch_ms": round(plain_launch, 2), "plain_total_ms": round(plain_total, 2),
                     "graph_capture_ms": round(capture_ms, 2), "graph_replay_launch_ms": round(replay_launch, 3),
                     "graph_replay_ms": round(replay_ms, 2), "correct": counts, "eager_at": larger,
                     "counts_agree": len(set(counts)) == 1})
        print(json.dumps(rows[-1]), flush=True)
        del graph, model
        torch.cuda.empty_cache()
    keys = ["eager_launch_ms", "eager_total_ms", "plain_total_ms", "graph_capture_ms", "graph_replay_ms"]
    summary = {"device": torch.cuda.get_device_name(), "images": images, "eval_batch": EVAL_BATCH,
               "cells": args.cells, "seed": args.seed,
               "median": {k: round(statistics.median(r[k] for r in rows), 2) for k in keys},
               "all_counts_agree": all(r["counts_agree"] for r in rows), "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "validation_cost.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: summary[k] for k in ("device", "median", "all_counts_agree")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
