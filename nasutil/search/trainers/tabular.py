"""Accuracy from the bundled NAS-Bench-201 table: training without the cost, for nb201.

Two fidelities: the 12-epoch schedule's validation accuracy (cheap) and the 200-epoch schedule's
test accuracy (full training). The 12-epoch figure comes from NAS-Bench-201's separate 12-epoch
runs and stands in for the accuracy a full run has after its first 12 epochs.
"""

from __future__ import annotations

import csv
import gzip
import importlib.resources
import io
from collections.abc import Sequence
from functools import lru_cache

from nasutil.errors import NasutilError
from nasutil.search.trainers.base import Reporter, Trainer, TrainResult
from nasutil.space import SearchSpace

DATASETS = ("cifar10", "cifar100", "imagenet16_120")
FIDELITIES = (12, 200)


@lru_cache(maxsize=1)
def accuracy_table() -> dict[str, dict[str, float]]:
    """Arch string -> column -> accuracy (%), from `nasutil/data/nasbench201_accuracy.csv.gz`."""
    resource = importlib.resources.files("nasutil.data").joinpath("nasbench201_accuracy.csv.gz")
    with resource.open("rb") as raw, gzip.open(raw, "rt", newline="") as text:
        reader = csv.DictReader(io.StringIO(text.read()))
        return {row["arch"]: {k: float(v) for k, v in row.items() if k not in ("arch", "index") and v != ""}
                for row in reader}


def column(dataset: str, epochs: int) -> str:
    return f"{dataset}_valid_12ep" if epochs == 12 else f"{dataset}_test_200ep"


class TabularTrainer(Trainer):
    name = "tabular"

    def __init__(self, dataset: str = "cifar10", fidelities: Sequence[int] = FIDELITIES) -> None:
        if dataset not in DATASETS:
            raise NasutilError(f"unknown tabular dataset {dataset!r} (choose from {', '.join(DATASETS)})")
        fidelities = [int(f) for f in fidelities]
        if not fidelities or any(f not in FIDELITIES for f in fidelities) or fidelities != sorted(set(fidelities)):
            raise NasutilError(f"trainer.fidelities must be an increasing subset of {list(FIDELITIES)}, "
                               f"got {fidelities}")
        self.dataset, self.fidelities = dataset, tuple(fidelities)
        self.max_step = self.fidelities[-1]

    def check(self, space_spec: str) -> None:
        if space_spec != "nb201":
            raise NasutilError(f"the tabular trainer has accuracy for nb201 only, not {space_spec!r} "
                               "(use trainer=torch)")
        accuracy_table()

    def accuracy(self, arch_text: str, epochs: int) -> float:
        row = accuracy_table().get(arch_text)
        if row is None:
            raise NasutilError(f"{arch_text} is not in the NAS-Bench-201 table")
        return row[column(self.dataset, epochs)]

    def train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int = 0) -> TrainResult:
        extra: dict[str, float] = {}
        accuracy = float("nan")
        for epochs in self.fidelities:
            accuracy = self.accuracy(arch_text, epochs)
            extra[f"accuracy_{epochs}ep"] = accuracy
            reporter.report(epochs, accuracy)
        return TrainResult(accuracy, float(self.fidelities[-1]), extra)

    def describe(self) -> str:
        steps = " then ".join(f"{e}-epoch" for e in self.fidelities)
        return f"tabular NAS-Bench-201, {self.dataset}, {steps} accuracy"
