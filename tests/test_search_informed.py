"""A search that many candidates run at once keeps its sampler informed: rung results count as results
(`RungInformedSampler`), trials are asked no further ahead of results than `halving.ask_ahead`, and a
fresh study first trains the predicted fast end (`anchors`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import datetime

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from nasutil.errors import NasutilError
from nasutil.search.rung_informed import RUNG_VALUES, RungInformedSampler, as_informed, informable

MAX = ["maximize", "maximize"]
CHOICES = ["a", "b", "c", "d", "e"]


def _frozen(state: TrialState, values=None, **attrs) -> FrozenTrial:
    now = datetime.datetime.now()
    return FrozenTrial(number=0, state=state, value=None, values=values, datetime_start=now,
                       datetime_complete=None if state == TrialState.RUNNING else now, params={"op": "a"},
                       distributions={"op": CategoricalDistribution(CHOICES)}, user_attrs=attrs, system_attrs={},
                       intermediate_values={}, trial_id=0)


def test_a_trial_past_a_rung_counts_as_a_result_while_it_runs_and_after_a_cut():
    running = as_informed(_frozen(TrialState.RUNNING, **{RUNG_VALUES: [71.5, 900.0]}))
    assert running.state == TrialState.COMPLETE and running.values == [71.5, 900.0]
    cut = as_informed(_frozen(TrialState.PRUNED, prune_stage="during_training", **{RUNG_VALUES: [60.0, 50.0]}))
    assert cut.state == TrialState.COMPLETE and cut.values == [60.0, 50.0]
    for unchanged in (_frozen(TrialState.RUNNING),  # no rung reached yet
                      _frozen(TrialState.PRUNED, prune_stage="before_training", **{RUNG_VALUES: [1.0, 1.0]}),
                      _frozen(TrialState.COMPLETE, values=[90.0, 800.0], **{RUNG_VALUES: [70.0, 800.0]})):
        assert as_informed(unchanged) is unchanged


def test_only_samplers_that_model_the_trials_are_informed():
    assert informable(optuna.samplers.TPESampler(seed=0))
    assert not informable(optuna.samplers.RandomSampler(seed=0))
    assert not informable(optuna.samplers.NSGAIISampler(seed=0))


def _proposals(sampler: optuna.samplers.BaseSampler, tell: bool = False, asks: int = 16) -> list[str]:
    """Ten candidates past their first rung, of which the two with op `a` lead there by far, still training
    (or, with `tell`, ended with those values); the next proposals."""
    study = optuna.create_study(directions=MAX, sampler=sampler)
    for i in range(10):
        op = "a" if i < 2 else CHOICES[1 + i % 4]
        study.enqueue_trial({"op": op})
        trial = study.ask()
        trial.suggest_categorical("op", CHOICES)
        values = [90.0, 1000.0] if op == "a" else [40.0, 100.0 + i]
        trial.set_user_attr(RUNG_VALUES, values)
        if tell:
            study.tell(trial, values)
    proposals = []
    for _ in range(asks):
        trial = study.ask()
        proposals.append(trial.suggest_categorical("op", CHOICES))
    return proposals


def test_the_sampler_proposes_from_rung_results_before_any_trial_ends():
    """Informed by the rungs, TPE proposes exactly what it proposes once those trials ended with those
    values; plain TPE, with no trial ended, proposes something else (at random)."""
    def tpe() -> optuna.samplers.TPESampler:
        return optuna.samplers.TPESampler(n_startup_trials=5, seed=3)

    told = _proposals(tpe(), tell=True)
    assert told.count("a") >= 6  # TPE favours the leading op
    assert _proposals(RungInformedSampler(tpe())) == told
    assert _proposals(tpe()) != told


def test_a_gaussian_process_sampler_is_informed_the_same_way():
    def gp() -> optuna.samplers.BaseSampler:
        return optuna.samplers.GPSampler(n_startup_trials=5, seed=3)

    told = _proposals(gp(), tell=True, asks=6)
    assert informable(gp()) and told.count("a") >= 4
    assert _proposals(RungInformedSampler(gp()), asks=6) == told
    assert _proposals(gp(), asks=6) != told


def _config(tmp_path, *extra: str):
    from nasutil.search.config import compose

    return compose(["study_name=informed", f"hydra.run.dir={tmp_path / 'run'}", "predictor=analytical",
                    "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=3",
                    "trainer.batch_size=64", "trainer.max_batches_per_epoch=9", "trainer.threads=1",
                    f"storage.url=sqlite:///{tmp_path / 'run' / 'study.db'}", *extra])


def test_trials_are_asked_no_further_ahead_of_results_than_the_setting(tmp_path):
    from nasutil.search.build import build_search

    (tmp_path / "run").mkdir()
    setup = build_search(_config(tmp_path, "halving=pareto", "halving.ask_ahead=2", "trainer.population=6"),
                         tmp_path / "run")
    search = setup.search
    assert isinstance(search.study.sampler, RungInformedSampler)
    search._unanswered.update({0, 1})
    assert search._ahead_of_results()  # two asked, no result yet: the third waits
    search._answered(0)
    assert not search._ahead_of_results()
    search._unanswered.update({2, 3})  # three waiting, one result: max(2, 1) = 2
    assert search._ahead_of_results()
    for n in (1, 2, 3):
        search._answered(n)
    search._unanswered.update({4, 5, 6, 7})  # four results so far let four be asked ahead
    assert search._ahead_of_results()
    search._answered(4)
    assert not search._ahead_of_results()


def test_a_population_search_with_a_small_ask_ahead_runs_its_whole_budget(tmp_path):
    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    code = main(["study_name=ahead", f"hydra.run.dir={run_dir}", "n_trials=10", "predictor=analytical", "plots=false",
                 "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=3", "trainer.batch_size=64",
                 "trainer.max_batches_per_epoch=9", "trainer.threads=1", "progress=false", "halving=pareto",
                 "halving.ask_ahead=1", "trainer.population=4"])
    study = optuna.load_study(study_name="ahead", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert code == 0
    finished = [t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(finished) == 10 and not [t for t in study.trials if t.state == TrialState.FAIL]
    reached = [t for t in study.trials if t.user_attrs.get("rungs")]
    assert reached and all(RUNG_VALUES in t.user_attrs for t in reached)


@pytest.mark.parametrize("bad", ["true", "0", "-3", "many"])
def test_bad_ask_ahead_is_a_user_error(bad):
    from nasutil.search.config import shipped

    with pytest.raises(NasutilError, match="ask_ahead"):
        shipped("halving", "pareto", ask_ahead=True if bad == "true" else (int(bad) if bad.lstrip("-").isdigit()
                                                                             else bad))


def test_the_fast_end_is_found_on_predictions():
    """The anchors are the fastest of a short search on the predictor: faster than the fastest of 256
    random cells, which holds one of NAS-Bench-201's fastest 1% about one time in twelve."""
    from nasutil.predictor import make_predictor
    from nasutil.registry import get_space
    from nasutil.search.anchors import fast_end
    from nasutil.search.objectives import Objectives

    space = get_space("nb201")
    predictor = make_predictor(profile="h200")
    target = predictor.target()
    objectives = Objectives.from_config({"metrics": ["accuracy", "throughput"]})
    anchors = fast_end(space, "nb201", predictor, target, objectives, count=3, seed=5)
    assert len(anchors) == 3 and len({tuple(sorted(p.items())) for p in anchors}) == 3
    archs = [space.suggest(optuna.trial.FixedTrial(p)) for p in anchors]
    fastest = predictor.predict_many("nb201", archs, target)[0].throughput_per_s
    sample = space.sample_many(256, seed=5)
    random_best = max(p.throughput_per_s for p in predictor.predict_many("nb201", sample, target))
    assert fastest > random_best
    assert fast_end(space, "nb201", predictor, target, Objectives.from_config({"metrics": ["accuracy"]}), 3, 5) == []


@pytest.mark.parametrize("count, predictions", [(2, 256), (4, 256), (16, 512)])
def test_the_fast_end_search_grows_with_the_anchors_wanted(count, predictions):
    """32 predictions for each anchor, at least 256: the best 16 of 128 lay far from the predicted top 16."""
    from nasutil.predictor import make_predictor
    from nasutil.registry import get_space
    from nasutil.search.anchors import fast_end
    from nasutil.search.objectives import Objectives

    predictor = make_predictor("operators", profile="h200")  # the model the short search ranks on
    calls = []
    original = predictor.predict_many

    def counted(space_spec, archs, target):
        calls.append(len(archs))
        return original(space_spec, archs, target)

    predictor.predict_many = counted
    anchors = fast_end(get_space("nb201"), "nb201", predictor, predictor.target(),
                       Objectives.from_config({"metrics": ["accuracy", "throughput"]}), count=count, seed=3)
    assert len(anchors) == count
    assert predictions / 2 < len(calls) <= predictions  # one per distinct cell proposed (TPE proposes some twice)


@pytest.mark.parametrize("seed", [131, 134, 136])
def test_the_fast_end_holds_the_measured_fastest_cell(seed):
    """Ranked on the learned model, whose trees flatten at the fast end, the four anchors of these seeds held
    none of the H200's measured fastest cell; ranked on the operator sum they hold it."""
    from nasutil.data.measured import measured_table
    from nasutil.predictor import make_predictor
    from nasutil.registry import get_space
    from nasutil.search.anchors import fast_end
    from nasutil.search.objectives import Objectives

    space = get_space("nb201")
    predictor = make_predictor(profile="h200")
    anchors = fast_end(space, "nb201", predictor, predictor.target(),
                       Objectives.from_config({"metrics": ["accuracy", "throughput"]}), count=4, seed=seed)
    measured = measured_table("nb201_h200").rows
    fastest = min(measured, key=lambda arch: measured[arch]["latency_ms"])
    assert fastest in {space.suggest(optuna.trial.FixedTrial(p)).to_string() for p in anchors}


def test_the_fast_end_is_ranked_on_the_learned_model_where_no_operator_table_serves():
    from nasutil.predictor import make_predictor
    from nasutil.search.anchors import fast_end_ranker

    predictor = make_predictor(profile="h200")
    assert fast_end_ranker(predictor, "nb201", predictor.target()).name == "operators"
    assert fast_end_ranker(predictor, "nb201", predictor.target(batch_size=64)) is predictor
    analytical = make_predictor("analytical", profile="h200")
    assert fast_end_ranker(analytical, "nb201", analytical.target()).name == "operators"


def test_a_fresh_study_trains_its_anchors_first(tmp_path, capsys):
    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    assert main(["study_name=anchored", f"hydra.run.dir={run_dir}", "n_trials=8", "prune=none", "evaluator=none",
                 "plots=false", "progress=false", "anchors=3", "seed=2"]) == 0
    study = optuna.load_study(study_name="anchored", storage=f"sqlite:///{run_dir / 'study.db'}")
    trials = sorted(study.trials, key=lambda t: t.number)
    assert [bool(t.user_attrs.get("anchor")) for t in trials] == [True] * 3 + [False] * 5
    speeds = [t.user_attrs["predicted_throughput_per_s"] for t in trials]
    assert min(speeds[:3]) > np.median(speeds[3:])
    assert main(["study_name=anchored", f"hydra.run.dir={run_dir}", "n_trials=10", "prune=none", "evaluator=none",
                 "plots=false", "progress=false", "anchors=3", "seed=2"]) == 0  # resumed: no anchors again
    again = optuna.load_study(study_name="anchored", storage=f"sqlite:///{run_dir / 'study.db'}").trials
    assert sum(bool(t.user_attrs.get("anchor")) for t in again) == 3
    capsys.readouterr()
    assert main(["study_name=anchored", f"hydra.run.dir={run_dir}", "n_trials=11", "prune=none", "evaluator=none",
                 "plots=false", "progress=false", "anchors=5", "seed=2"]) == 0  # other anchors: said, not silent
    assert "anchors=5 not trained: anchors go first in a new study only, and this one holds trials" in \
        " ".join(capsys.readouterr().out.split())


def test_bad_anchors_is_a_one_line_error(tmp_path, capsys):
    from nasutil.cli.search_command import main

    assert main([f"hydra.run.dir={tmp_path}", "anchors=-1", "plots=false", "progress=false", "n_trials=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "anchors" in err and "\n" not in err
    # more anchors than trials once ran a short search of 32,000 predictions for a 3-trial search, for minutes
    started = time.perf_counter()
    assert main([f"hydra.run.dir={tmp_path / 'b'}", "anchors=100", "plots=false", "progress=false", "n_trials=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("nasutil-search: error: anchors=100 is more than the search's n_trials=3: anchors are trained "
                   "as its first trials (use at most n_trials)"), err
    assert time.perf_counter() - started < 60 and not (tmp_path / "b" / "study.db").exists()
    # 20,000 anchors ran a short search of 640,000 predictions before any trial; 126 of a space of 125 the same
    assert main([f"hydra.run.dir={tmp_path / 'c'}", "anchors=20000", "n_trials=20000"]) == 2
    assert capsys.readouterr().err.strip().startswith("nasutil-search: error: anchors=20000 is more than 128: ")
    assert main([f"hydra.run.dir={tmp_path / 'd'}", "anchors=126", "n_trials=200", "trainer=torch", "search_space=cell",
                 "search_space.settings.nodes=2", "search_space.settings.stages=1",
                 "search_space.settings.cells_per_stage=1"]) == 2
    assert "error: anchors=126 is more than the 125 architectures of cell:" in capsys.readouterr().err
    assert time.perf_counter() - started < 60


def test_the_fast_end_of_a_latency_objective_is_its_lowest_latency():
    """A minimised hardware objective ranks the other way: the anchors are the lowest predicted latencies."""
    from nasutil.predictor import make_predictor
    from nasutil.registry import get_space
    from nasutil.search.anchors import fast_end
    from nasutil.search.objectives import Objectives

    space, predictor = get_space("nb201"), make_predictor(profile="h200")
    target = predictor.target()
    objectives = Objectives.from_config({"metrics": ["accuracy", "latency"]})
    anchors = fast_end(space, "nb201", predictor, target, objectives, count=2, seed=1, predictions=64)
    chosen = [p.latency_ms for p in predictor.predict_many(
        "nb201", [space.suggest(optuna.trial.FixedTrial(p)) for p in anchors], target)]
    sample = predictor.predict_many("nb201", space.sample_many(64, seed=1), target)
    assert max(chosen) <= np.median([p.latency_ms for p in sample])
    assert chosen == sorted(chosen)  # best first


def test_a_prune_policy_at_the_first_rung_sees_candidates_still_training(tmp_path):
    """The controller hands the policy this run's trials that reached the first rung while they train on, and
    a finished trial once, from its record."""
    from nasutil.search.build import build_search

    (tmp_path / "run").mkdir()
    setup = build_search(_config(tmp_path, "halving=pareto", "trainer.population=4", "prune=dominated_throughput",
                                 "prune.fidelity=rung"), tmp_path / "run")
    search = setup.search
    first = search.halving.rungs[0]
    record = {"predicted_throughput_per_s": 1000.0, "predicted_latency_ms": 0.5, "predicted_utilization": 0.1}
    search._remember_first_rung(0, "a", record, first, 55.0)
    search._remember_first_rung(1, "b", record, first, 65.0)
    running = search._history([]).seen
    assert [(s.arch, s.rung_accuracy, s.accuracy) for s in running] == [("a", 55.0, None), ("b", 65.0, None)]
    search.study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE, values=[70.0, 1000.0],
        user_attrs={**record, "arch": "a", "accuracy": 70.0, "rungs": {f"{first:.6g}": 55.0}}))
    history = search._history(search.study.get_trials())
    assert sorted((s.arch, s.rung_accuracy, s.accuracy) for s in history.seen) == [("a", 55.0, 70.0),
                                                                                   ("b", 65.0, None)]


def _trial_past_the_first_rung(tmp_path, monkeypatch, then):
    """A search whose training reports the first rung, records the prune policy's history, then `then()`."""
    from nasutil.search.build import build_search
    from nasutil.search.trainers.base import TrainResult

    (tmp_path / "run").mkdir()
    search = build_search(_config(tmp_path, "halving=pareto", "trainer.population=4", "evaluator=none"),
                          tmp_path / "run").search
    during: list = []

    def train(space, text, reporter, trial_number=0):
        reporter.report_rung(search.halving.rungs[0], 55.0)
        during.extend((s.arch == text, s.rung_accuracy, s.accuracy) for s in search._history([]).seen)
        then()
        return TrainResult(70.0, 3.0, {})

    monkeypatch.setattr(search.trainer, "train", train)
    return search, during


def test_a_trial_past_the_first_rung_is_in_the_prune_policys_history_while_it_trains(tmp_path, monkeypatch):
    search, during = _trial_past_the_first_rung(tmp_path, monkeypatch, lambda: None)
    trial = search.study.ask()
    search.objective(trial)
    assert during == [(True, 55.0, None)]


def test_a_trial_that_fails_past_the_first_rung_leaves_the_history_and_keeps_its_rungs(tmp_path, monkeypatch):
    def fail():
        raise RuntimeError("the device fell over")

    search, during = _trial_past_the_first_rung(tmp_path, monkeypatch, fail)
    trial = search.study.ask()
    with pytest.raises(RuntimeError):
        search.objective(trial)
    assert during == [(True, 55.0, None)] and search._history([]).seen == []
    assert search.study.get_trials()[0].user_attrs["rungs"] == {f"{search.halving.rungs[0]:.6g}": 55.0}


def test_a_population_search_pruning_at_the_first_rung_runs_its_whole_budget(tmp_path):
    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    code = main(["study_name=rung", f"hydra.run.dir={run_dir}", "n_trials=12", "predictor=analytical", "plots=false",
                 "prune=dominated_throughput", "prune.fidelity=rung", "prune.warmup_trials=2", "trainer=torch",
                 "trainer.dataset=digits", "trainer.epochs=3", "trainer.batch_size=64",
                 "trainer.max_batches_per_epoch=9", "trainer.threads=1", "progress=false", "halving=pareto",
                 "trainer.population=4"])
    study = optuna.load_study(study_name="rung", storage=f"sqlite:///{run_dir / 'study.db'}")
    assert code == 0
    assert len([t for t in study.trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]) == 12
    assert not [t for t in study.trials if t.state == TrialState.FAIL]


def test_the_anchor_ranking_figures_are_their_result_file():
    """BENCHMARKS' table and docs/search.md's sentence on which model ranks the fast end are
    `benchmarks/anchor_ranking.py`'s committed result."""
    root = Path(__file__).resolve().parents[1]
    report = json.loads((root / "benchmarks/results/cpu/anchor_ranking/anchor_ranking.json").read_text())
    benchmarks = (root / "BENCHMARKS.md").read_text()
    section = benchmarks[benchmarks.index("### The front's fast end"):benchmarks.index("## Prune before training")]
    for key, row in report["summary"].items():
        ranker, predictions = key.split("_")
        assert (f"| {ranker} | {predictions} | {row['hold_fastest_measured']} of {row['seeds']} | "
                f"{row['worst_measured_rank']} | {row['median_seconds']:.2f} |") in section
    learned, operators = report["whole_space"]["learned"], report["whole_space"]["operators"]
    assert ", ".join(map(str, learned["measured_ranks_of_predicted_fastest"])) in section
    assert operators["measured_ranks_of_predicted_fastest"] == list(range(16))
    search = " ".join((root / "docs/search.md").read_text().split())
    slow = round((learned["fastest_predicted_over_measured"] - 1) * 100)
    others = learned["cells_within_2pct_of_its_prediction_of_the_fastest"] - 1
    assert f"predicts the fastest cell {slow}% slow, within 2% of {others} other cells' predictions" in search
    old, new = report["summary"]["learned_128"], report["summary"]["operators_256"]
    assert f"held that cell on {old['hold_fastest_measured']} of {old['seeds']} seeds (130-149)" in search
    assert new["hold_fastest_measured"] == new["seeds"] and "held it on all 20" in search
    assert f"every anchor among the {new['worst_measured_rank'] + 1} measured fastest" in search


def test_the_anchor_replay_table_is_its_result_files():
    """The before/after replay of the fast end's ranking in BENCHMARKS is the two committed replays."""
    root = Path(__file__).resolve().parents[1]
    section = (root / "BENCHMARKS.md").read_text()
    section = section[section.index("The same change replayed"):section.index("## Prune before training")]
    runs = {}
    for tag in ("before", "after"):
        report = json.loads((root / f"benchmarks/results/cpu/population_front/population_front_anchor_{tag}.json").read_text())
        runs[tag] = report
    gains = []
    for way in ("p1-a4-q10", "p16-pareto-informed-g16-a4-pred-t10-q10", "p64-pareto-informed-g16-a4-pred-t10-q10"):
        volumes = {tag: [r["hypervolume"] for r in runs[tag]["runs"] if r["way"] == way] for tag in runs}
        assert len(volumes["before"]) == len(volumes["after"]) == 20
        mean = {tag: float(np.mean(v)) for tag, v in volumes.items()}
        ratio = {tag: runs[tag]["summary"][f"{way}/t48"] for tag in runs}
        assert (f"| {way} | {mean['before']:.2f} | {mean['after']:.2f} | {min(volumes['before']):.2f} | "
                f"{min(volumes['after']):.2f} | {ratio['before']['mean_hypervolume_ratio']:.3f} | "
                f"{ratio['after']['mean_hypervolume_ratio']:.3f} | {ratio['before']['worst_hypervolume_ratio']:.3f} | "
                f"{ratio['after']['worst_hypervolume_ratio']:.3f} |") in section
        gains.append(round((mean["after"] / mean["before"] - 1) * 100, 1))
    assert f"the mean hypervolume by {min(gains)}-{max(gains)}%" in section
