"""Prune-before-training policies: end a trial on its predicted figures, before paying to train it.

A policy sees the candidate's prediction and what the study has seen so far (every candidate it
scored, and the accuracy of those it trained) and returns a reason to prune, or None to train.
A config names a policy class by `_target_` (`conf/prune/*.yaml`); your own is any `PrunePolicy`
subclass, named the same way (`prune._target_=my_package.MyPolicy`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from nasutil.errors import NasutilError
from nasutil.pareto import front_2d
from nasutil.predictor import Prediction


@dataclass(frozen=True)
class Seen:
    """An earlier candidate: its predicted figures and, where it was trained to the end, its accuracy."""

    throughput_per_s: float
    latency_ms: float
    utilization: float | None
    accuracy: float | None = None  # None: pruned before training, stopped early or failed
    scored_throughput_per_s: float | None = None  # what a trained one was scored on (measured, where measured)
    arch: str | None = None  # the cell, where known: a cell the sampler proposed again is one cell, not two
    rung_accuracy: float | None = None  # its validation accuracy at the search's first rung, where it reached it

    @property
    def scored(self) -> float:
        return self.throughput_per_s if self.scored_throughput_per_s is None else self.scored_throughput_per_s

    @property
    def measured_error(self) -> float | None:
        """How much faster than predicted it measured (relative), where it was scored on a measurement."""
        if self.scored_throughput_per_s is None:
            return None
        return self.scored_throughput_per_s / self.throughput_per_s - 1.0


@dataclass
class History:
    """What the study has seen before the current candidate, oldest first."""

    seen: list[Seen] = field(default_factory=list)

    @property
    def trained(self) -> list[Seen]:
        return [s for s in self.seen if s.accuracy is not None]

    def trained_cells(self) -> list[Seen]:
        """Trained candidates, a cell the sampler proposed again (a repeat, reusing its result) counted once:
        two records of one cell are one piece of evidence, not two."""
        out, cells = [], set()
        for s in self.trained:
            if s.arch is None or s.arch not in cells:
                out.append(s)
                cells.add(s.arch)
        return out

    def front(self) -> list[Seen]:
        """Trained candidates that no other trained one beats on both accuracy and the throughput they
        were scored on (measured where measured, else predicted), fastest first."""
        return front_2d(self.trained, x=lambda s: s.scored, y=lambda s: s.accuracy)

    def at_first_rung(self) -> History:
        """The same candidates judged at the first rung: each one's accuracy there in place of its final one
        (None where it did not reach it), its measured throughput kept where it was measured. Every candidate
        is compared at one fidelity, and in a population many reach the first rung long before any ends."""
        return History([replace(s, accuracy=s.rung_accuracy,
                                scored_throughput_per_s=s.scored_throughput_per_s if s.rung_accuracy is not None
                                else None) for s in self.seen])


class PrunePolicy(ABC):
    """Decides, from predictions only, whether a candidate is worth training."""

    name: ClassVar[str]

    @abstractmethod
    def decide(self, candidate: Prediction, history: History) -> str | None:
        """A one-line reason to prune the candidate, or None to train it."""

    def estimate(self, candidate: Prediction, history: History) -> float | None:
        """The accuracy a candidate this policy pruned would reach at most, where the policy can tell
        (None: it cannot). With `pruned_as=predicted` the sampler sees it in place of the accuracy
        that training would have measured."""
        return None

    def describe(self) -> str:
        params = ", ".join(f"{k}={v}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{self.name} ({params})" if params else self.name


class NoPruning(PrunePolicy):
    """Train every candidate (the baseline)."""

    name = "none"

    def decide(self, candidate: Prediction, history: History) -> str | None:
        return None


class UtilizationThreshold(PrunePolicy):
    """Skip networks predicted to use less than `threshold` of the GPU's datasheet peak."""

    name = "utilization_threshold"

    def __init__(self, threshold: float) -> None:
        if not 0 <= threshold <= 1:
            raise NasutilError(f"prune.threshold must be a utilization in [0, 1], got {threshold}")
        self.threshold = float(threshold)

    def decide(self, candidate: Prediction, history: History) -> str | None:
        u = candidate.utilization
        if u is not None and u < self.threshold:
            return f"predicted utilization {u:.2%} < threshold {self.threshold:.2%}"
        return None


class UtilizationQuantile(PrunePolicy):
    """Skip networks predicted to use the GPU worse than most of what the study has seen: adapts to
    the space and device without a hand-set threshold."""

    name = "utilization_quantile"

    def __init__(self, quantile: float = 0.5, warmup_trials: int = 10) -> None:
        if not 0 <= quantile < 1:
            raise NasutilError(f"prune.quantile must be in [0, 1), got {quantile}")
        if warmup_trials < 0:
            raise NasutilError(f"prune.warmup_trials must be >= 0, got {warmup_trials}")
        self.quantile, self.warmup_trials = float(quantile), int(warmup_trials)

    def decide(self, candidate: Prediction, history: History) -> str | None:
        seen = [s.utilization for s in history.seen if s.utilization is not None]
        if candidate.utilization is None or len(seen) < max(1, self.warmup_trials):
            return None
        cut = float(np.quantile(seen, self.quantile))
        if candidate.utilization < cut:
            return (f"predicted utilization {candidate.utilization:.2%} < {self.quantile:g} quantile "
                    f"{cut:.2%} of {len(seen)} scored")
        return None


class LatencySLO(PrunePolicy):
    """Skip networks predicted to miss the latency SLO: they would be infeasible anyway."""

    name = "latency_slo"

    def __init__(self, max_latency_ms: float | None) -> None:
        if max_latency_ms is None or not max_latency_ms > 0:
            raise NasutilError("prune=latency_slo needs a positive prune.max_latency_ms "
                               "(or objectives.latency_slo_ms)")
        self.max_latency_ms = float(max_latency_ms)

    def decide(self, candidate: Prediction, history: History) -> str | None:
        if candidate.latency_ms > self.max_latency_ms:
            return f"predicted latency {candidate.latency_ms:.3f} ms > SLO {self.max_latency_ms:g} ms"
        return None


class DominatedThroughput(PrunePolicy):
    """Skip a candidate that the current Pareto front is predicted to dominate.

    Its throughput is known before training (predicted); its accuracy is not, so it is bounded by
    the best accuracy that trained cells of about the same predicted throughput reached (within
    `band`, relative, at least `min_neighbours` distinct cells: a cell the sampler proposed again is one
    piece of evidence, not two). Neighbours that failed to learn (below `degenerate_fraction` of the best
    accuracy trained so far, such as NAS-Bench-201's cells of `none` edges at 10%) say nothing about a
    working candidate of the same speed, and are not counted. If a trained front member that is faster
    even where the prediction errs against it already reaches that bound plus `margin` accuracy points,
    training the candidate is predicted to add nothing.

    Where trained candidates were scored on measurements, the front is their measured front, and the
    candidate's prediction is raised by the error the predictor showed there: with `throughput_error:
    auto`, the largest of the predictor's held-out error and the `error_quantile` (0.75) of how much
    faster than predicted the trained cells of about its predicted throughput (within `error_band`, at
    least `min_neighbours`; else all trained ones) measured. A quantile, not the largest: the largest of a
    hundred errors is the tail's tip, of three a typical one. The front's fast end is guarded whole: a
    candidate that the largest error seen anywhere could make faster than every trained cell is trained,
    because that end holds most of the hypervolume and the predictor errs most on the fastest cells.
    `top_band` widens that end: a candidate that the largest error could bring within `top_band`
    (relative) of the fastest trained cell is trained too (0: only one that could outrun it): the predictor
    cannot rank the fastest cells (on nb201 the 30 cells predicted fastest, above 461,000 images/s on the
    H200, measure anywhere from 473,000 to 609,000), and guarding that end lets a lower `error_quantile`
    prune elsewhere. A fixed `throughput_error` replaces both errors.

    `fidelity` says which accuracies are compared: `final` (trained to the end), `rung` (every candidate's
    validation accuracy at the search's first rung, with `halving`), or `auto`: final ones once
    `warmup_trials` candidates were trained to the end, the first rung's until then. A population with
    halving asks nearly its whole budget before its first candidates end, so judged on final accuracies it
    never prunes; at the first rung it has evidence early, and a candidate it prunes there costs nothing
    where one cut at that rung costs its preparation and a share of its training. A rung's accuracies tell
    candidates of one speed apart less surely than final ones, so there a bound takes `rung_min_neighbours`
    cells within `rung_band` (4 within 10%, where final ones take 2 within 5%: on NAS-Bench-201's tables
    fewer let a population prune cells of the final front; BENCHMARKS.md, "Pruning at the first rung").
    """

    name = "dominated_throughput"
    FIDELITIES = ("final", "rung", "auto")

    def __init__(self, warmup_trials: int = 10, band: float = 0.05, min_neighbours: int = 2,
                 margin: float = 0.0, degenerate_fraction: float = 0.5,
                 throughput_error: float | str = "auto", error_band: float = 0.2,
                 error_quantile: float = 0.75, top_band: float = 0.0, fidelity: str = "auto",
                 rung_min_neighbours: int = 4, rung_band: float = 0.1) -> None:
        if fidelity not in self.FIDELITIES:
            raise NasutilError(f"prune.fidelity must be one of {', '.join(self.FIDELITIES)}, got {fidelity!r}")
        if isinstance(rung_min_neighbours, bool) or not isinstance(rung_min_neighbours, int) or rung_min_neighbours < 1:
            raise NasutilError(f"prune.rung_min_neighbours must be a whole number >= 1, got {rung_min_neighbours!r}")
        if isinstance(rung_band, bool) or not isinstance(rung_band, (int, float)) or not 0 <= rung_band < 10:
            raise NasutilError(f"prune.rung_band must be a fraction from 0 to below 10, got {rung_band!r}")
        self.fidelity, self.rung_min_neighbours, self.rung_band = fidelity, int(rung_min_neighbours), float(rung_band)
        if warmup_trials < 0 or min_neighbours < 1 or band < 0:
            raise NasutilError("prune: need warmup_trials >= 0, min_neighbours >= 1 and band >= 0")
        if not 0 <= degenerate_fraction < 1:
            raise NasutilError(f"prune.degenerate_fraction must be in [0, 1), got {degenerate_fraction!r}")
        if throughput_error != "auto" and not (isinstance(throughput_error, (int, float))
                                               and 0 <= throughput_error < 1):
            raise NasutilError(f"prune.throughput_error must be auto or a fraction in [0, 1), got {throughput_error!r}")
        self.warmup_trials, self.band = int(warmup_trials), float(band)
        self.min_neighbours, self.margin = int(min_neighbours), float(margin)
        if isinstance(error_band, bool) or not isinstance(error_band, (int, float)) or not 0 <= error_band < 10:
            raise NasutilError(f"prune.error_band must be a fraction >= 0, got {error_band!r}")
        self.degenerate_fraction, self.throughput_error = float(degenerate_fraction), throughput_error
        self.error_band = float(error_band)
        # the quantile of the measured errors allowed (1.0: the largest, the second version's rule); the upper
        # quartile was tuned on nb201 seeds 500-509 (experiments/nb201_pruning/README.md)
        if isinstance(error_quantile, bool) or not isinstance(error_quantile, (int, float)) \
                or not 0 <= error_quantile <= 1:
            raise NasutilError(f"prune.error_quantile must be a fraction in [0, 1], got {error_quantile!r}")
        self.error_quantile = float(error_quantile)
        if isinstance(top_band, bool) or not isinstance(top_band, (int, float)) or not 0 <= top_band < 1:
            raise NasutilError(f"prune.top_band must be a fraction in [0, 1), got {top_band!r}")
        self.top_band = float(top_band)

    def _neighbours(self, candidate: Prediction, history: History, band: float | None = None) -> list[float]:
        """Accuracies of the working trained candidates of about the candidate's predicted throughput."""
        t, band = candidate.throughput_per_s, self.band if band is None else band
        lo, hi = t / (1 + band), t * (1 + band)
        trained = history.trained_cells()
        floor = self.degenerate_fraction * max((s.accuracy for s in trained), default=0.0)
        return [s.accuracy for s in trained if lo <= s.throughput_per_s <= hi and s.accuracy >= floor]

    def _error(self, candidate: Prediction, history: History) -> float:
        """How much faster than predicted the candidate is taken to measure at most: the `error_quantile`
        of its measured neighbours' errors (the predictor errs differently by region)."""
        if self.throughput_error != "auto":
            return float(self.throughput_error)
        held_out = float(candidate.expected_error or 0.0)
        measured = [(s.throughput_per_s, s.measured_error) for s in history.trained_cells()
                    if s.measured_error is not None]
        if not measured:
            return held_out
        t = candidate.throughput_per_s
        lo, hi = t / (1 + self.error_band), t * (1 + self.error_band)
        near = [e for p, e in measured if lo <= p <= hi]
        pool = near if len(near) >= self.min_neighbours else [e for _, e in measured]
        return max(held_out, float(np.quantile(pool, self.error_quantile)))

    def _largest_error(self, candidate: Prediction, history: History) -> float:
        """The most any trained cell beat its prediction by (or the held-out error, or a fixed error)."""
        if self.throughput_error != "auto":
            return float(self.throughput_error)
        errors = [s.measured_error for s in history.trained_cells() if s.measured_error is not None]
        return max([float(candidate.expected_error or 0.0), *errors])

    def _faster(self, candidate: Prediction, history: History) -> list[Seen]:
        """Front members faster than the candidate could be: its prediction raised by the predictor's error.
        None where, raised by the largest error seen, it could outrun every trained cell (or come within
        `top_band` of the fastest): the front's fast end holds most of its hypervolume, and the predictor errs
        most on the fastest cells."""
        front = history.front()
        if not front or candidate.throughput_per_s * (1 + self._largest_error(candidate, history)) \
                > front[0].scored * (1 - self.top_band):
            return []
        fastest_possible = candidate.throughput_per_s * (1 + self._error(candidate, history))
        return [s for s in front if s.scored >= fastest_possible]

    def estimate(self, candidate: Prediction, history: History) -> float | None:
        """The bound `decide` prunes on (the best accuracy of the candidate's throughput neighbours),
        capped at the best accuracy of the front members faster than it: the sampler then sees the
        candidate as what the policy predicted, dominated by that front member. Only from final accuracies:
        a rung's accuracy is not what the sampler compares it with."""
        if self._judged_at_rung(history):
            return None
        neighbours = self._neighbours(candidate, history)
        faster = [s.accuracy for s in self._faster(candidate, history)]
        if len(neighbours) < self.min_neighbours or not faster:
            return None
        return min(max(neighbours), max(faster))

    def decide(self, candidate: Prediction, history: History) -> str | None:
        return self._judge(candidate, history)[1]

    def stopped_by(self, candidate: Prediction, history: History) -> str | None:
        """The first of the policy's checks that keeps the candidate (`warm-up`: too few trained to the end;
        `neighbours`: too few trained of about its throughput; `no faster front member`; `bound not beaten`:
        its neighbours reach the faster member's accuracy), or None where it is pruned: why a search pruned
        little, counted."""
        return self._judge(candidate, history)[0]

    def _judged_at_rung(self, history: History) -> bool:
        """Whether the candidate is judged on first-rung accuracies (see `fidelity`)."""
        if self.fidelity == "auto":
            return len(history.trained) < max(1, self.warmup_trials)
        return self.fidelity == "rung"

    def _judge(self, candidate: Prediction, history: History) -> tuple[str | None, str | None]:
        """(the check that kept the candidate, None) or (None, the reason it is pruned)."""
        at_rung = self._judged_at_rung(history)
        band, wanted = (self.rung_band, self.rung_min_neighbours) if at_rung else (self.band, self.min_neighbours)
        if at_rung:
            history = history.at_first_rung()
        if len(history.trained) < max(1, self.warmup_trials):
            return "warm-up", None
        neighbours = self._neighbours(candidate, history, band)
        if len(neighbours) < wanted:
            return "neighbours", None
        bound = max(neighbours)
        faster = self._faster(candidate, history)
        if not faster:
            return "no faster front member", None
        best = max(faster, key=lambda s: s.accuracy)
        if best.accuracy >= bound + self.margin:
            t = candidate.throughput_per_s
            where = " at the first rung" if at_rung else ""
            return None, (f"predicted dominated{where}: {best.accuracy:.2f}% at {best.scored:,.0f}/s on the front "
                          f"vs <= {bound:.2f}% for {len(neighbours)} working trained at {t:,.0f}/s +-{band:.0%}"
                          f" (throughput error allowed {self._error(candidate, history):.1%})")
        return "bound not beaten", None


def history_from(records: Sequence[dict], first_rung: float | None = None) -> History:
    """History from stored trial records (user attributes), oldest first; with `first_rung` (the fraction
    of the training the search's first rung is at), each one's validation accuracy there too."""
    seen = []
    for r in records:
        if r.get("predicted_throughput_per_s") is None:
            continue
        scored = r.get("measured_throughput_per_s") if r.get("hardware_source") == "measured" else None
        seen.append(Seen(float(r["predicted_throughput_per_s"]), float(r["predicted_latency_ms"]),
                         r.get("predicted_utilization"), r.get("accuracy"),
                         float(scored) if scored is not None and r.get("accuracy") is not None else None,
                         r.get("arch"), rung_accuracy_at(r, first_rung)))
    return History(seen)


def rung_accuracy_at(record: dict, fraction: float | None) -> float | None:
    """A record's validation accuracy at the rung at `fraction` of the training (its `rungs`), if it has one."""
    rungs = record.get("rungs")
    if fraction is None or not isinstance(rungs, dict):
        return None
    value = rungs.get(f"{fraction:.6g}")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
