"""The trainer interface and the result it returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from nasutil.space import SearchSpace


class Reporter(Protocol):
    """Receives intermediate accuracy; raises `nasutil.search.controller.StoppedEarly` when the study's
    pruner stops the training (a trainer lets it propagate)."""

    def report(self, step: int, accuracy: float) -> None: ...


@dataclass
class TrainResult:
    accuracy: float  # percent: the objective
    epochs: float  # training spent, in epochs of the trainer's schedule
    extra: dict[str, float] = field(default_factory=dict)  # e.g. test accuracy, low-fidelity accuracy


class Trainer(ABC):
    name: ClassVar[str]
    #: the last step reported (e.g. 200 epochs): Hyperband's max_resource
    max_step: int = 1

    def check(self, space_spec: str) -> None:
        """Fail before the search starts (a one-line NasutilError) if this trainer cannot serve the space."""

    @abstractmethod
    def train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int = 0) -> TrainResult:
        """Train the candidate, reporting accuracy at each step; the last accuracy is the objective."""

    def describe(self) -> str:
        return self.name
