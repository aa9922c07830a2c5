"""Accuracy from the bundled NAS-Bench-201 table (`nasutil.data.nasbench201`): training without the
cost, for nb201, at the table's fidelities (12-epoch validation, 200-epoch test accuracy)."""

from __future__ import annotations

from collections.abc import Sequence

from nasutil.data.nasbench201 import DATASETS, FIDELITIES, accuracy_column, accuracy_table
from nasutil.errors import NasutilError
from nasutil.search.trainers.base import Reporter, Trainer, TrainResult
from nasutil.space import SearchSpace


class TabularTrainer(Trainer):
    name = "tabular"

    def __init__(self, dataset: str = "cifar10", fidelities: Sequence[int] = FIDELITIES) -> None:
        if dataset not in DATASETS:
            raise NasutilError(f"unknown tabular dataset {dataset!r} (choose from {', '.join(DATASETS)})")
        listed = not isinstance(fidelities, str) and isinstance(fidelities, Sequence)  # a list, in a config too
        given = list(fidelities) if listed else fidelities
        if not listed or not given or any(isinstance(f, bool) or f not in FIDELITIES for f in given) \
                or given != sorted(set(given)):
            raise NasutilError(f"trainer.fidelities must be an increasing subset of {list(FIDELITIES)}, got {given!r}")
        self.dataset, self.fidelities = dataset, tuple(int(f) for f in given)
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
        return row[accuracy_column(self.dataset, epochs)]

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
