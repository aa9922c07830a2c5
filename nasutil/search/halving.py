"""Successive halving inside a search: candidates cut at rungs, part of the way through their training.

Most candidates of a search lose. Asynchronous successive halving (ASHA, Li et al., "A System for
Massively Parallel Hyperparameter Tuning", MLSys 2020) validates every candidate at rungs, fractions
`min_fraction * reduction_factor**k` of its training, and lets it go on only if it ranks in the top
`1 / reduction_factor` of the candidates that reached the same rung so far; the others stop there,
and in a population their place goes to the next candidate at once.

`ParetoHalving` ranks on every objective of the search, with the rung's validation accuracy standing
in for the final one and the predicted hardware figures (known before training) for the rest, by
non-dominated sorting as MO-ASHA does (Schmucker et al., "Multi-objective Asynchronous Successive
Halving", 2021). `select` says which candidates at a rung go on, of the `n` there, `k = n //
reduction_factor` (at least one):

- `fronts` (the default): every candidate with fewer than `k` candidates in better fronts than its own. A
  fast candidate a little less accurate than the rest is on the first front and is never cut for its
  accuracy alone. With two objectives most candidates at an early rung lie on one or two fronts, and
  whole fronts go on: often many more than `k`.
- `nsga2`: the first `k` in NSGA-II's order (fronts, then, within a front, the candidates that crowd
  their neighbours least, by crowding distance), and every end of the first front (the most accurate,
  the best on a hardware figure), so the fast candidate still goes on. It trains less and finds a
  somewhat weaker front: on NAS-Bench-201's tables (40 seeds of 48 trials, `population_front.py`) 16 at
  once spent a median 0.72x the trainings of `fronts` for a median hypervolume 0.992 of its (below 0.95
  on 3 seeds); in whole searches on Fashion-MNIST on an H100 (BENCHMARKS.md, "NSGA-II's order at the
  rungs") 0.70-0.79x the epochs, 1.00-1.20x the candidates an hour, fronts 0.93-1.04 of `fronts`'.

`AccuracyHalving` ranks on accuracy only (plain ASHA).

A cut candidate is a pruned trial (`prune_stage=during_training`, `prune_policy=halving:NAME`); the
rung accuracies of every trial are stored (`rungs`), so a resumed study ranks against them.

Where many candidates train at once, most of a trial budget would be asked before any result came back,
and a model-based sampler (TPE) would propose them blind. Two settings keep it informed, as BOHB (Falkner
et al., "BOHB: Robust and Efficient Hyperparameter Optimization at Scale", ICML 2018) fits its model on
the lower budgets while the higher ones run:

- `inform_sampler`: the sampler sees each candidate's objective values at its latest rung (rung accuracy,
  predicted hardware figures) as a result, while it trains on and after a cut
  (`nasutil.search.rung_informed`);
- `ask_ahead`: at most `max(ask_ahead, results so far)` trials are asked with no result yet (no rung
  reached, not ended), so a population of 256 does not ask a 64-trial budget in one go.

Halving composes with pruning before training (a pruned candidate never reaches a rung) and with an
Optuna pruner in `early_stopping` (both may stop a candidate).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from nasutil.errors import NasutilError


#: how a rung picks the candidates that go on (see the module)
SELECTIONS = ("fronts", "nsga2")


@dataclass(frozen=True)
class Cut:
    """Why a candidate stops at a rung."""

    rung: int
    fraction: float
    rank: int  # competitors ranked ahead: in better fronts (with nsga2, also less crowded in its own)
    competitors: int
    kept: int  # how many of them go on

    def __str__(self) -> str:
        return (f"cut at rung {self.rung + 1} ({self.fraction:.3g} of its training): {self.rank} of the "
                f"{self.competitors} candidates there rank ahead, {self.kept} go on")


class Halving:
    """No rungs: every candidate trains to its end (the `none` option)."""

    name = "none"
    rungs: tuple[float, ...] = ()
    inform_sampler = False
    ask_ahead: int | None = None

    def decide(self, rung: int, trial: int, values: Sequence[float], directions: Sequence[str]) -> Cut | None:
        return None

    def name_objectives(self, names: Sequence[str]) -> None:
        """The search's objectives by name, in the order of `values` (told once, before any `decide`)."""

    def remember(self, rung_values: Iterable[tuple[int, int, Sequence[float]]], directions: Sequence[str]) -> None:
        """Rung values of trials of earlier runs of the study: (rung, trial, values)."""

    def describe(self) -> str:
        return "none"


class ParetoHalving(Halving):
    """Cut at rungs on every objective of the search, by non-dominated sorting (see the module)."""

    name = "pareto"

    def __init__(self, reduction_factor: float = 3, min_fraction: float = 1 / 9, inform_sampler: bool = True,
                 ask_ahead: int | None = 16, hardware_tolerance: float = 0.1, select: str = "fronts") -> None:
        if select not in SELECTIONS:
            raise NasutilError(f"halving.select must be one of {', '.join(SELECTIONS)}, got {select!r}")
        self.select = select
        if not isinstance(inform_sampler, bool):
            raise NasutilError(f"halving.inform_sampler must be true or false, got {inform_sampler!r}")
        if ask_ahead is not None and (isinstance(ask_ahead, bool) or not isinstance(ask_ahead, int) or ask_ahead < 1):
            raise NasutilError(f"halving.ask_ahead must be a whole number >= 1 or null, got {ask_ahead!r}")
        self.inform_sampler, self.ask_ahead = inform_sampler, ask_ahead
        if isinstance(hardware_tolerance, bool) or not isinstance(hardware_tolerance, (int, float)) \
                or not 0 <= hardware_tolerance < 1:
            raise NasutilError(f"halving.hardware_tolerance must be a fraction in [0, 1), got {hardware_tolerance!r}")
        self.hardware_tolerance = float(hardware_tolerance)
        self._names: list[str] = []  # unnamed objectives are all compared exactly
        for key, value in (("reduction_factor", reduction_factor), ("min_fraction", min_fraction)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise NasutilError(f"halving.{key} must be a number, got {value!r}")
        if reduction_factor < 2:
            raise NasutilError(f"halving.reduction_factor must be >= 2, got {reduction_factor}")
        if not 0 < min_fraction < 1:
            raise NasutilError(f"halving.min_fraction must be in (0, 1), got {min_fraction}")
        self.reduction_factor, self.min_fraction = float(reduction_factor), float(min_fraction)
        rungs, fraction = [], self.min_fraction
        while fraction < 1 - 1e-3:  # a rung at the very end would cut a finished training
            rungs.append(round(fraction, 6))
            fraction *= self.reduction_factor
        self.rungs = tuple(rungs)
        self._board: list[dict[int, tuple[float, ...]]] = [{} for _ in self.rungs]
        self._lock = threading.Lock()

    def name_objectives(self, names: Sequence[str]) -> None:
        self._names = list(names)

    def decide(self, rung: int, trial: int, values: Sequence[float], directions: Sequence[str]) -> Cut | None:
        """Record `trial`'s values at `rung`; a Cut if it ranks below the top 1/reduction_factor there.
        Once the objectives are named, every one but accuracy (a predicted hardware figure) is compared
        within `hardware_tolerance`."""
        with self._lock:
            board = self._board[rung]
            board[trial] = tuple(float(v) for v in self._ranked(values))
            numbers = list(board)
            points = np.array([board[n] for n in numbers], dtype=float)
        tolerances = [0.0 if name == "accuracy" else self.hardware_tolerance for name in self._names]
        gains, margins = _tolerant_gains(points, directions, tolerances)
        fronts = front_indices(gains, margins)
        mine = numbers.index(trial)
        kept = max(1, int(len(numbers) // self.reduction_factor))
        if self.select == "fronts":
            ahead = int((fronts < fronts[mine]).sum())
            return None if ahead < kept else Cut(rung, self.rungs[rung], ahead, len(numbers), kept)
        crowding = crowding_distances(gains, fronts)
        if fronts[mine] == 0 and math.isinf(crowding[mine]):  # an end of the first front always goes on
            return None
        ahead = int(((fronts < fronts[mine]) | ((fronts == fronts[mine]) & (crowding > crowding[mine]))).sum())
        return None if ahead < kept else Cut(rung, self.rungs[rung], ahead, len(numbers), kept)

    def remember(self, rung_values: Iterable[tuple[int, int, Sequence[float]]], directions: Sequence[str]) -> None:
        with self._lock:
            for rung, trial, values in rung_values:
                if 0 <= rung < len(self._board):
                    self._board[rung][trial] = tuple(float(v) for v in self._ranked(values))

    def _ranked(self, values: Sequence[float]) -> Sequence[float]:
        return values

    def describe(self) -> str:
        rungs = ", ".join(f"{f:.3g}" for f in self.rungs)
        informed = "; the sampler learns from rungs" if self.inform_sampler else ""
        ahead = f"; at most {self.ask_ahead} asked ahead of results" if self.ask_ahead else ""
        tolerance = (f"; predicted hardware figures within {self.hardware_tolerance:.0%} not held against a candidate"
                     if self.hardware_tolerance and self.name == "pareto" else "")
        order = (" by fronts, then crowding distance, the first front's ends always" if self.select == "nsga2"
                 else " with whole fronts")
        return (f"{self.name} (rungs at {rungs} of the training, 1/{self.reduction_factor:g} go on{order}{tolerance}"
                f"{informed}{ahead})")


class AccuracyHalving(ParetoHalving):
    """Plain ASHA: cut at rungs on validation accuracy alone (the first objective)."""

    name = "accuracy"

    def __init__(self, reduction_factor: float = 3, min_fraction: float = 1 / 9, inform_sampler: bool = True,
                 ask_ahead: int | None = 16, hardware_tolerance: float = 0.1) -> None:
        # on one objective a front is a tie of accuracies: the top 1/reduction_factor go on, ties together
        super().__init__(reduction_factor, min_fraction, inform_sampler, ask_ahead, hardware_tolerance, select="fronts")

    def decide(self, rung: int, trial: int, values: Sequence[float], directions: Sequence[str]) -> Cut | None:
        return super().decide(rung, trial, values, directions[:1])

    def remember(self, rung_values: Iterable[tuple[int, int, Sequence[float]]], directions: Sequence[str]) -> None:
        super().remember(rung_values, directions[:1])

    def _ranked(self, values: Sequence[float]) -> Sequence[float]:
        return values[:1]


def _as_gains(points: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Every objective turned into one to maximise."""
    signs = np.array([1.0 if d == "maximize" else -1.0 for d in directions[:points.shape[1]]])
    gains = points * signs
    return np.where(np.isfinite(gains), gains, -np.inf)


def _tolerant_gains(points: np.ndarray, directions: Sequence[str],
                    tolerances: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Gains, and each column's margin for `front_indices`: a column with a relative tolerance is compared on
    its logarithm, so that the tolerance is one margin whatever the figure's size (a column with a value
    that is not positive keeps its plain gains and no margin)."""
    gains = _as_gains(points, directions)
    margins = np.zeros(points.shape[1])
    for k, tolerance in enumerate(tolerances[:points.shape[1]]):
        column = points[:, k]
        if tolerance > 0 and np.all(np.isfinite(column)) and np.all(column > 0):
            gains[:, k] = np.log(column) * (1.0 if directions[k] == "maximize" else -1.0)
            margins[k] = math.log1p(tolerance)
    return gains, margins


def front_indices(gains: np.ndarray, margins: np.ndarray | None = None) -> np.ndarray:
    """Each point's front by non-dominated sorting (0: not dominated; 1: dominated only by front 0; ...),
    every column maximised. With `margins`, a point dominates another only where it is better by at least
    its column's margin in each column (epsilon-dominance): within the margin, the other may be the better."""
    n = len(gains)
    if n == 0:
        return np.zeros(0, dtype=int)
    shift = np.zeros(gains.shape[1]) if margins is None else np.asarray(margins, dtype=float)
    at_least = (gains[:, None, :] >= gains[None, :, :] + shift).all(axis=2)
    better = (gains[:, None, :] > gains[None, :, :]).any(axis=2)
    dominates = at_least & better  # [i, j]: i dominates j
    left = dominates.sum(axis=0)
    fronts = np.full(n, -1, dtype=int)
    current = np.flatnonzero(left == 0)
    front = 0
    while current.size:
        fronts[current] = front
        left = left - dominates[current].sum(axis=0)
        left[fronts >= 0] = -1
        current = np.flatnonzero(left == 0)
        front += 1
    return fronts


def crowding_distances(gains: np.ndarray, fronts: np.ndarray) -> np.ndarray:
    """NSGA-II's crowding distance of each point within its front: the sum over the columns of the gap
    between its two neighbours there, over the front's range in that column; a front's ends in any column
    (and every point of a front of one or two) are infinitely far, so an ordering keeps them first."""
    distances = np.zeros(len(gains))
    for front in np.unique(fronts):
        members = np.flatnonzero(fronts == front)
        if len(members) <= 2:
            distances[members] = np.inf
            continue
        for column in gains[members].T:
            order = np.argsort(column, kind="stable")
            low, high = column[order[0]], column[order[-1]]
            ends = np.flatnonzero((column == low) | (column == high))
            distances[members[ends]] = np.inf
            if np.isfinite(high - low) and high > low:  # a figure that is missing (-inf) spreads nothing
                gaps = (column[order[2:]] - column[order[:-2]]) / (high - low)
                distances[members[order[1:-1]]] += gaps
    return distances
