"""The trainer interface and the result it returns."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from nasutil.space import SearchSpace


class Reporter(Protocol):
    """Receives intermediate accuracy; raises `nasutil.search.controller.StoppedEarly` when the study's
    pruner stops the training (a trainer lets it propagate).

    A reporter may also carry `rungs` (fractions of the training, e.g. (1/9, 1/3)): a trainer that can
    validate part of the way through reports the validation accuracy there to `report_rung(fraction,
    accuracy)`, which raises StoppedEarly where the candidate is cut (`nasutil.search.halving`)."""

    def report(self, step: int, accuracy: float) -> None: ...


class RungReporter(Reporter, Protocol):
    rungs: Sequence[float]

    def report_rung(self, fraction: float, accuracy: float) -> None: ...


@dataclass
class TrainResult:
    accuracy: float  # percent: the objective
    epochs: float  # training spent, in epochs of the trainer's schedule
    extra: dict[str, float] = field(default_factory=dict)  # e.g. test accuracy, low-fidelity accuracy


class Trainer(ABC):
    name: ClassVar[str]
    #: the last step reported (e.g. 200 epochs): Hyperband's max_resource
    max_step: int = 1
    #: trials the search runs at once for this trainer (a population trains several candidates together)
    concurrent_trials: int = 1
    #: whether `train` reports validation accuracy at a reporter's rungs (see Reporter)
    reports_rungs: bool = False

    def check(self, space_spec: str) -> None:
        """Fail before the search starts (a one-line NasutilError) if this trainer cannot serve the space."""

    def start_loading(self) -> None:
        """Begin loading what the trials will need (a dataset onto the device) in the background, so that it
        overlaps the rest of the search's build; `check` waits for it and reports its failure. A trainer with
        nothing slow to load does nothing."""

    @abstractmethod
    def train(self, space: SearchSpace, arch_text: str, reporter: Reporter, trial_number: int = 0) -> TrainResult:
        """Train the candidate, reporting accuracy at each step; the last accuracy is the objective."""

    def quiet(self, device: str) -> contextlib.AbstractContextManager:
        """A block in which this trainer runs nothing on `device` (so that a measurement there sees it
        idle); a trainer that trains one candidate at a time, between measurements, has nothing to hold."""
        return contextlib.nullcontext()

    def idle(self, device: str) -> bool:
        """Whether nothing of this trainer's runs or waits to run on `device` now, so that a measurement
        waiting there for company gains nothing by waiting longer. One candidate at a time: nothing trains
        while a trial is measured."""
        return self.concurrent_trials <= 1

    def interrupt(self) -> None:
        """Ctrl-C: every `train` running stops soon with `nasutil.errors.Interrupted` (its trial fails with
        that reason), and none starts. A trainer whose `train` returns quickly need not do anything."""

    def closing(self) -> None:
        """A hint: the search asks no more trials now (its budget is held by the trials running or ended), so
        the candidates training are the last ones. A trainer that trains several at once may share the device
        among them differently from then on; one at a time has nothing to do."""

    def host_turn(self) -> contextlib.AbstractContextManager:
        """A block for a trial's host work before its training (predicting, deciding): a trainer that trains
        several candidates in threads of one process hands out turns, so that trials being set up do not
        starve the thread that launches the others' steps."""
        return contextlib.nullcontext()

    def describe(self) -> str:
        return self.name

    def activity(self) -> dict[str, Any] | None:
        """How the trainer used the device, for the run's summary (None where it has nothing to say)."""
        return None
