"""Candidates trained together reach what each reaches alone: the torch trainer, one candidate at a time
and as one population, same seeds, on a real dataset; accuracies side by side.

    python benchmarks/cotrain_equivalence.py --dataset digits --epochs 3 --max-batches 0 --out benchmarks/results/cpu
    python benchmarks/cotrain_equivalence.py --device cuda --epochs 5 --out benchmarks/results/h200

Writes cotrain_equivalence.csv (one row per candidate) and cotrain_equivalence.json (settings, the wall
time of each way, the most candidates that trained together, the largest difference).
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import threading
import time
from pathlib import Path

import torch

from nasutil import get_space
from nasutil.search.config import shipped


class Curve:
    def __init__(self) -> None:
        self.steps: list[tuple[int, float]] = []

    def report(self, step: int, accuracy: float) -> None:
        self.steps.append((step, accuracy))


def train_alone(settings: dict, archs: list[str]) -> tuple[list, float]:
    trainer = shipped("trainer", "torch", **settings)
    trainer.check("nb201")
    started, out = time.perf_counter(), []
    for number, arch in enumerate(archs):
        curve = Curve()
        out.append((trainer.train(get_space("nb201"), arch, curve, trial_number=number), curve))
    return out, time.perf_counter() - started


def train_together(settings: dict, archs: list[str]) -> tuple[list, float, int]:
    trainer = shipped("trainer", "torch", **settings, population=len(archs))
    trainer.check("nb201")
    out: list = [None] * len(archs)

    def one(number: int, arch: str) -> None:
        curve = Curve()
        out[number] = (trainer.train(get_space("nb201"), arch, curve, trial_number=number), curve)

    threads = [threading.Thread(target=one, args=(n, a)) for n, a in enumerate(archs)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out, time.perf_counter() - started, trainer._population.most_together if trainer._population else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--dataset", default="fashion_mnist")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--max-batches", type=int, default=40, help="batches per epoch (0: the whole split)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eager-check", type=int, default=0, metavar="N",
                        help="also train the first N candidates alone with eager steps (graphs=false, CUDA)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    archs = [a.to_string() for a in get_space("nb201").sample_many(args.candidates, seed=args.seed)]
    settings = dict(dataset=args.dataset, epochs=args.epochs, batch_size=args.batch_size, lr=0.05,
                    max_batches_per_epoch=args.max_batches or None, device=args.device, seed=args.seed)
    alone, alone_s = train_alone(settings, archs)
    together, together_s, most = train_together(settings, archs)
    eager = train_alone({**settings, "graphs": False}, archs[:args.eager_check])[0] if args.eager_check else []
    rows, worst = [], 0.0
    for number, arch in enumerate(archs):
        (a, a_curve), (t, t_curve) = alone[number], together[number]
        worst = max(worst, abs(a.accuracy - t.accuracy), abs(a.extra["test_accuracy"] - t.extra["test_accuracy"]))
        rows.append({"candidate": number, "arch": arch, "valid_alone": a.accuracy, "valid_together": t.accuracy,
                     "test_alone": a.extra["test_accuracy"], "test_together": t.extra["test_accuracy"],
                     "curves_equal": a_curve.steps == t_curve.steps,
                     "valid_eager": eager[number][0].accuracy if number < len(eager) else None,
                     "train_loss_alone": a.extra.get("train_loss"),
                     "train_loss_eager": eager[number][0].extra.get("train_loss") if number < len(eager) else None})
        print(f"{number}  valid {a.accuracy:6.2f} / {t.accuracy:6.2f}   test {a.extra['test_accuracy']:6.2f} / "
              f"{t.extra['test_accuracy']:6.2f}   {arch}", flush=True)
    with (args.out / "cotrain_equivalence.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    summary = {
        "machine": {"device": torch.cuda.get_device_name() if args.device.startswith("cuda") else platform.processor()
                    or platform.machine(), "torch": torch.__version__, "threads": torch.get_num_threads()},
        "settings": {**settings, "candidates": args.candidates},
        "alone_s": round(alone_s, 2), "together_s": round(together_s, 2), "most_together": most,
        "max_abs_accuracy_difference": worst, "all_curves_equal": all(r["curves_equal"] for r in rows),
    }
    (args.out / "cotrain_equivalence.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
