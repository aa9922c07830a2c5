"""The trial record: what a search stores on each Optuna trial (its user attributes), and how to read it.

The controller writes it; prune policies, outputs, plots, the summary and analysis scripts read it
back from the storage alone. The keys are those of `TrialRecord`; a key is absent (never None) where
a trial has no value for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from optuna.trial import FrozenTrial, TrialState

from nasutil.predictor import Prediction

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
PRUNED_CONSTRAINT = "pruned"  # the constraint an infeasible-recorded pruned trial violates
OUTCOMES = ("trained", "repeat", "pruned_before_training", "stopped_early", "failed", "surplus", "running")


class TrialRecord(TypedDict, total=False):
    """One trial's user attributes."""

    arch: str
    worker: int  # the `worker` setting of the process that ran it
    device: str  # the device it was given from `devices`, where set
    # predicted, before any training (`Prediction` of the search's predictor)
    predictor: str
    predicted_latency_ms: float
    predicted_throughput_per_s: float
    predicted_utilization: float
    flops_per_image: int
    params: int
    prediction_validated: bool  # the profile was validated on this space and timed every kind of op
    unvalidated_reason: str  # what it never saw, where not
    # pruned before training, or stopped early by an Optuna pruner
    prune_stage: str  # "before_training" or "during_training"
    prune_policy: str
    prune_reason: str
    estimated_accuracy: float  # the policy's estimate, told to the sampler with pruned_as=predicted
    accuracy_partial: float
    # training
    accuracy: float
    accuracy_detail: dict[str, float]
    training_epochs: float
    curve: dict[str, float]  # step -> intermediate accuracy
    duplicate_of: int  # the trial that trained the same arch
    # measured on the hardware, where an evaluator is configured
    measured_device: str
    measured_latency_ms: float
    measured_latency_cv: float
    measured_throughput_per_s: float
    measured_utilization: float
    measured_sm_clock_mhz: float
    measured_batch: int  # which of the search's measurement batches measured it (from 0), where batched
    measured_in_batch: int  # its place in that batch (0: first)
    unmeasured_reason: str  # why a trained trial has no measurement (a table without its cell): scored on prediction
    hardware_source: str  # "measured" or "predicted"
    constraints: dict[str, float]
    fail_reason: str
    fail_traceback: str
    surplus: bool  # not run: other workers had claimed the study's whole budget (state FAIL)


def predicted_figures(p: Prediction) -> TrialRecord:
    """The record fields of a prediction."""
    record = TrialRecord(predictor=p.predictor, predicted_latency_ms=p.latency_ms,
                         predicted_throughput_per_s=p.throughput_per_s, predicted_utilization=p.utilization,
                         flops_per_image=p.flops_per_image, params=p.params, prediction_validated=p.validated)
    if p.unvalidated_reason:
        record["unvalidated_reason"] = p.unvalidated_reason
    return record


def hardware_figures(attrs: dict[str, Any]) -> dict[str, Any]:
    """Latency, throughput and utilization of a trial: those it was scored on (`hardware_source`), else
    measured where it was measured, else predicted."""
    source = attrs.get("hardware_source")
    if source not in ("measured", "predicted"):
        source = "measured" if attrs.get("measured_latency_ms") is not None else "predicted"
    return {key: attrs.get(f"{source}_{key}") for key in ("latency_ms", "throughput_per_s", "utilization")}


def outcome(t: FrozenTrial) -> str:
    """What happened to a trial, whichever way it was recorded: `trained`, `repeat` (an arch the study
    had trained already), `pruned_before_training`, `stopped_early`, `failed`, `surplus` (not run: the
    study's budget was claimed by other workers) or `running`."""
    stage = t.user_attrs.get("prune_stage")
    if t.state in FINISHED and stage == "before_training":
        return "pruned_before_training"
    if t.state in FINISHED and stage == "during_training":
        return "stopped_early"
    if t.state == TrialState.COMPLETE:
        return "repeat" if t.user_attrs.get("duplicate_of") is not None else "trained"
    if t.state == TrialState.FAIL and t.user_attrs.get("surplus"):
        return "surplus"
    return {TrialState.FAIL: "failed", TrialState.RUNNING: "running"}.get(t.state, t.state.name.lower())


def has_accuracy(t: FrozenTrial) -> bool:
    """Trained to the end, here or as the repeat of an arch trained earlier."""
    return outcome(t) in ("trained", "repeat")


def with_accuracy(t: FrozenTrial) -> dict[str, Any]:
    """A trial's record, with accuracy only where it was trained to the end."""
    record = dict(t.user_attrs)
    if not has_accuracy(t):
        record.pop("accuracy", None)
    return record


def feasible(t: FrozenTrial) -> bool:
    """Meets the objectives' constraints; a pruned trial recorded as infeasible never does."""
    cons = t.user_attrs.get("constraints") or {}
    return PRUNED_CONSTRAINT not in cons and all(v <= 0 for v in cons.values())


def generation(t: FrozenTrial) -> int | None:
    """The generation a genetic sampler (NSGA-II/III) put the trial in, where one did."""
    for key, value in t.system_attrs.items():
        if key.endswith("Sampler:generation"):
            return int(value)
    return None


@dataclass
class Counts:
    """What the study holds, by outcome."""

    finished: int = 0
    trained: int = 0  # trained to the end (duplicates of an already trained arch excluded)
    duplicates: int = 0
    pruned_before: int = 0
    stopped_early: int = 0
    failed: int = 0
    surplus: int = 0  # asked for after other workers had claimed the whole budget: never run
    running: int = 0
    unmeasured: int = 0  # trained (or repeats) with no measurement to score them on, scored on their prediction
    unvalidated_predictions: int = 0  # predicted by a model never validated for them: pruning rests on those
    epochs: float = 0.0
    reasons: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, trials: list[FrozenTrial]) -> Counts:
        c = cls()
        for t in trials:
            c.epochs += float(t.user_attrs.get("training_epochs") or 0.0)
            if t.state in FINISHED:
                c.finished += 1
            kind = outcome(t)
            if kind in ("trained", "repeat") and t.user_attrs.get("unmeasured_reason"):
                c.unmeasured += 1
            if t.user_attrs.get("prediction_validated") is False:  # as the closing report's warning counts
                c.unvalidated_predictions += 1
            if kind == "trained":
                c.trained += 1
            elif kind == "repeat":
                c.duplicates += 1
            elif kind == "pruned_before_training":
                c.pruned_before += 1
                policy = str(t.user_attrs.get("prune_policy", "policy"))
                c.reasons[policy] = c.reasons.get(policy, 0) + 1
            elif kind == "stopped_early":
                c.stopped_early += 1
            elif kind == "failed":
                c.failed += 1
            elif kind == "surplus":
                c.surplus += 1
            elif kind == "running":
                c.running += 1
        return c

    @property
    def trainings(self) -> int:
        """Candidates that cost any training (to the end or stopped early)."""
        return self.trained + self.stopped_early
