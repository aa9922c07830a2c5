"""How a pruned trial is told to the sampler: as PRUNED, as an infeasible COMPLETE trial that NSGA-II
counts in its generation and ranks below every trained trial, or as a COMPLETE trial with the
policy's predicted values, while the tables, counts and policies still treat it as pruned."""

from __future__ import annotations

import warnings
from collections import Counter

import optuna
import pytest
from optuna.trial import TrialState

from nasutil.errors import NasutilError
from nasutil.search.controller import Search, resolve_pruned_as
from nasutil.search.objectives import Objectives
from nasutil.search.record import Counts, generation, outcome
from nasutil.search.tables import pareto_trials, trial_row

POPULATION = 10


QUANTILE = ("utilization_quantile", {"quantile": 0.5, "warmup_trials": 5})  # prunes about half; no estimate
DOMINATED = ("dominated_throughput", {"warmup_trials": 5, "band": 0.1, "min_neighbours": 2})


def _search(pruned_as: str, sampler: optuna.samplers.BaseSampler, n_trials: int = 60,
            policy: tuple[str, dict] | None = None) -> optuna.Study:
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.trainers.tabular import TabularTrainer

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    predictor, target = predictor_for(compose(["predictor=analytical"]))
    option, settings = policy or QUANTILE
    search = Search(study, "nb201", predictor, target, shipped("prune", option, **settings),
                    TabularTrainer(fidelities=[200]), Objectives.from_config({"metrics": ["accuracy", "throughput"]}),
                    pruned_as=pruned_as)
    search.run(n_trials)
    return study


def _nsga2() -> optuna.samplers.NSGAIISampler:
    return optuna.samplers.NSGAIISampler(population_size=POPULATION, seed=0)


@pytest.fixture(scope="module")
def infeasible() -> optuna.Study:
    return _search("infeasible", _nsga2())


def test_auto_is_predicted_for_genetic_samplers_only():
    assert resolve_pruned_as("auto", _nsga2()) == "predicted"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NSGA-III is experimental
        assert resolve_pruned_as("auto", optuna.samplers.NSGAIIISampler(population_size=4)) == "predicted"
    assert resolve_pruned_as("auto", optuna.samplers.RandomSampler()) == "pruned"
    assert resolve_pruned_as("auto", optuna.samplers.TPESampler()) == "pruned"
    assert resolve_pruned_as("pruned", _nsga2()) == "pruned"
    with pytest.raises(NasutilError, match="pruned_as must be one of auto, pruned, infeasible, predicted"):
        resolve_pruned_as("skip", _nsga2())


def test_pruned_trials_fill_nsga2_generations_as_infeasible_complete_trials(infeasible):
    trials = infeasible.trials
    pruned = [t for t in trials if outcome(t) == "pruned_before_training"]
    assert len(pruned) >= 15
    assert all(t.state == TrialState.COMPLETE and t.constraints.get("pruned") == 1.0 for t in pruned)
    assert all(t.values[0] == 0.0 and t.values[1] == t.user_attrs["predicted_throughput_per_s"] for t in pruned)
    per_generation = Counter(generation(t) for t in trials)
    last = max(per_generation)
    # Every generation but the last is exactly one population, pruned trials included.
    assert all(per_generation[g] == POPULATION for g in range(last))
    assert last == len(trials) // POPULATION - (len(trials) % POPULATION == 0)
    assert any(generation(t) == g for t in pruned for g in range(1, last))


def test_infeasible_pruned_trials_are_never_trained_front_or_parents(infeasible):
    trials = infeasible.trials
    pruned = {t.number for t in trials if outcome(t) == "pruned_before_training"}
    counts = Counts.of(trials)
    assert counts.pruned_before == len(pruned) and counts.trainings == counts.trained
    assert counts.trained + counts.duplicates + counts.pruned_before == counts.finished == len(trials)
    assert not pruned & {t.number for t in pareto_trials(infeasible)}
    assert not pruned & {t.number for t in infeasible.best_trials}  # Optuna's own front respects the constraint
    rows = [trial_row(t) for t in trials if t.number in pruned]
    assert all(r["outcome"] == "pruned_before_training" and "accuracy" not in r and r["feasible"] == ""
               for r in rows)
    # Constrained domination: once a generation offers enough trained trials, NSGA-II picks no pruned parent.
    attrs = infeasible._storage.get_study_system_attrs(infeasible._study_id)
    by_id = {t._trial_id: t for t in trials}
    late = [by_id[i] for key, ids in attrs.items() if key.startswith("NSGAIISampler:parent:")
            and int(key.rsplit(":", 1)[1]) >= 3 for i in ids]
    assert late and not any(t.number in pruned for t in late)


def test_recorded_as_pruned_nsga2_evolves_fewer_generations(infeasible):
    study = _search("pruned", _nsga2())
    pruned = [t for t in study.trials if outcome(t) == "pruned_before_training"]
    assert pruned and all(t.state == TrialState.PRUNED for t in pruned)
    gens = max(generation(t) for t in study.trials)
    assert gens < max(generation(t) for t in infeasible.trials)


def test_random_sampler_keeps_pruned_trials_pruned():
    study = _search("auto", optuna.samplers.RandomSampler(seed=0), n_trials=20)
    states = Counter((outcome(t), t.state) for t in study.trials)
    assert states[("pruned_before_training", TrialState.PRUNED)] > 0
    assert states[("pruned_before_training", TrialState.COMPLETE)] == 0


def test_predicted_pruned_trials_carry_the_policy_estimate_and_stay_dominated():
    study = _search("auto", _nsga2(), policy=DOMINATED)
    trials = study.trials
    pruned = [t for t in trials if outcome(t) == "pruned_before_training"]
    trained = [t for t in trials if outcome(t) == "trained"]
    assert len(pruned) >= 5
    for t in pruned:  # the sampler sees the policy's estimate, and the trial stays feasible
        assert t.state == TrialState.COMPLETE and not t.constraints
        assert t.values == [t.user_attrs["estimated_accuracy"], t.user_attrs["predicted_throughput_per_s"]]
        earlier = [u for u in trained if u.number < t.number]
        assert any(u.values[0] >= t.values[0] and u.values[1] >= t.values[1] for u in earlier)
    per_generation = Counter(generation(t) for t in trials)
    assert all(per_generation[g] == POPULATION for g in range(max(per_generation)))
    counts = Counts.of(trials)
    assert counts.pruned_before == len(pruned) and counts.trainings == counts.trained == len(trained)
    front = {t.number for t in pareto_trials(study)}
    assert front and front <= {t.number for t in trained}
    assert all("accuracy" not in trial_row(t) for t in pruned)


def test_predicted_falls_back_to_infeasible_where_the_policy_has_no_estimate():
    study = _search("predicted", _nsga2(), n_trials=30)
    pruned = [t for t in study.trials if outcome(t) == "pruned_before_training"]
    assert pruned and all(t.state == TrialState.COMPLETE and t.constraints == {"pruned": 1.0} and t.values[0] == 0.0
                          for t in pruned)
