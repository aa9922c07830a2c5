"""A sampler that learns from rung results while candidates train on.

Optuna tells a sampler about a trial once, when it ends. With successive halving in a population, most
of a trial budget is asked while the candidates asked first are still training, so a model-based
sampler (TPE, GP) proposes them as if nothing were known, although every candidate past its first
rung has a validation accuracy and its predicted hardware figures. BOHB (Falkner et al., ICML 2018)
fits its model on the lower budgets in that case; `RungInformedSampler` does the same for any sampler
that reads the study's trials afresh at each ask: it shows the wrapped sampler a study in which a
trial that reached a rung (`RUNG_VALUES` in its user attributes: its objective values there, written
by the search at each rung) counts as complete with those values, while it runs and after it was cut
at a rung. Trials trained to the end keep their final values; everything else is the study itself.

Genetic samplers (NSGA-II/III) keep generations of their own and are not wrapped (`informable`).
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

RUNG_VALUES = "rung_values"


def informable(sampler: optuna.samplers.BaseSampler) -> bool:
    """Whether the sampler builds its proposals from the study's trials at each ask (TPE, GP), so that
    showing it rung results informs it; random search ignores results, genetic samplers keep state."""
    model_based = (optuna.samplers.TPESampler, getattr(optuna.samplers, "GPSampler", ()))
    return isinstance(sampler, model_based)


def as_informed(trial: FrozenTrial) -> FrozenTrial:
    """The trial as the wrapped sampler sees it: complete with its latest rung values where it is still
    running or was cut at a rung (a pruned trial with rung values); otherwise unchanged."""
    values = trial.user_attrs.get(RUNG_VALUES)
    if not values or trial.state not in (TrialState.RUNNING, TrialState.PRUNED):
        return trial
    if trial.state == TrialState.PRUNED and trial.user_attrs.get("prune_stage") != "during_training":
        return trial
    return FrozenTrial(number=trial.number, state=TrialState.COMPLETE, value=None,
                       values=[float(v) for v in values], datetime_start=trial.datetime_start,
                       datetime_complete=trial.datetime_complete or trial.datetime_start, params=trial.params,
                       distributions=trial.distributions, user_attrs=trial.user_attrs,
                       system_attrs=trial.system_attrs, intermediate_values=trial.intermediate_values,
                       trial_id=trial._trial_id)


class _InformedStudy:
    """The study as the wrapped sampler reads it: every attribute the study's own, its trials informed."""

    def __init__(self, study: optuna.Study) -> None:
        self._study = study

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None,
                    use_cache: bool = False) -> list[FrozenTrial]:
        trials = [as_informed(t) for t in self._study._get_trials(deepcopy=deepcopy, use_cache=use_cache)]
        return trials if states is None else [t for t in trials if t.state in states]

    def get_trials(self, deepcopy: bool = True, states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=deepcopy, states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self.get_trials()


class RungInformedSampler(optuna.samplers.BaseSampler):
    """`base`, proposing from a study in which rung results count as results (see the module)."""

    def __init__(self, base: optuna.samplers.BaseSampler) -> None:
        self.base = base

    def __str__(self) -> str:
        return f"{type(self.base).__name__} (informed by rungs)"

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.base.infer_relative_search_space(_InformedStudy(study), trial)  # type: ignore[arg-type]

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.base.sample_relative(_InformedStudy(study), trial, search_space)  # type: ignore[arg-type]

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self.base.sample_independent(_InformedStudy(study), trial, param_name,  # type: ignore[arg-type]
                                            param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.base.before_trial(study, trial)

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self.base.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.base.reseed_rng()
