"""The search's own trial runner: one sampler seeded once (a population search proposes what it
proposed last time from the same seed), no asks past the budget, trial attributes written at once, and
trained candidates measured in batches inside the trainer's quiet block."""

from __future__ import annotations

import contextlib
import threading
import time

import optuna

from nasutil.search.measurer import MeasurementQueue, Measurer
from nasutil.search.runner import TrialRunner
from nasutil.search.storage import rdb_storage, write_user_attrs


def _population_search(run_dir, seed: int = 4) -> optuna.Study:
    from nasutil.cli.search_command import main

    args = ["study_name=repro", f"hydra.run.dir={run_dir}", "n_trials=8", f"seed={seed}", "predictor=analytical",
            "plots=false", "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=1",
            "trainer.batch_size=64", "trainer.max_batches_per_epoch=3", "trainer.population=3", "trainer.ahead=1",
            "trainer.threads=1", "progress=false"]
    assert main(args) == 0
    return optuna.load_study(study_name="repro", storage=f"sqlite:///{run_dir / 'study.db'}")


def test_a_population_search_proposes_from_its_seed(tmp_path):
    """Optuna's n_jobs reseeds the sampler for every trial; here the first trials (asked before any
    finished: population + ahead) are the same in two runs, and a trial number's training, the same."""
    first, second = _population_search(tmp_path / "a"), _population_search(tmp_path / "b")
    arch = {s: {t.number: t.user_attrs.get("arch") for t in s.trials} for s in (first, second)}
    assert [arch[first][n] for n in range(4)] == [arch[second][n] for n in range(4)]
    same = [n for n in arch[first] if arch[first][n] == arch[second].get(n)]
    results = {s: {t.number: t.user_attrs.get("accuracy") for t in s.trials} for s in (first, second)}
    assert all(results[first][n] == results[second][n] for n in same)
    for study in (first, second):  # a population never asks past its budget
        assert len(study.trials) == 8 and all(t.state.is_finished() for t in study.trials)
        assert not any(t.state == optuna.trial.TrialState.FAIL for t in study.trials)


def test_a_search_one_at_a_time_is_reproducible_from_its_seed(tmp_path):
    from nasutil.cli.search_command import main

    values = []
    for name in ("a", "b"):
        run_dir = tmp_path / name
        assert main(["study_name=one", f"hydra.run.dir={run_dir}", "n_trials=25", "seed=9", "plots=false",
                     "progress=false"]) == 0
        study = optuna.load_study(study_name="one", storage=f"sqlite:///{run_dir / 'study.db'}")
        values.append([(t.user_attrs.get("arch"), t.state, t.values) for t in study.trials])
    assert values[0] == values[1]


def test_the_runner_asks_only_while_the_budget_has_room_and_stops_when_asked():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    asked, lock = [], threading.Lock()
    runner: TrialRunner

    def objective(trial, begun):
        with lock:
            asked.append(trial.number)
        return trial.suggest_float("x", 0, 1)

    def after(study, frozen):
        if len(study.trials) >= 6:
            runner.stop()

    runner = TrialRunner(study, objective, workers=3, max_trials=100, callbacks=[after],
                         may_ask=lambda: sum(t.state.is_finished() or t.state.name == "RUNNING"
                                             for t in study.trials) < 6, poll_s=0.05)
    runner.run()
    assert len(study.trials) == 6 and sorted(asked) == list(range(6))


def test_an_end_wakes_one_waiting_thread_not_all_of_them():
    """A population of 64 runs 80 trial threads while its budget lets only a few trials run at once; each
    end woke all of them, and each took the interpreter to read the budget. An end now wakes one, which
    passes the turn on only when it could ask: the budget is read a few times per trial, not once per
    thread, and every trial is still run."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))

    def objective(trial, begun):
        threading.Event().wait(0.01)
        return trial.suggest_float("x", 0, 1)

    def may_ask() -> bool:
        return runner._running < 2

    def after(study, frozen):
        if len(study.trials) >= 40:
            runner.stop()

    runner = TrialRunner(study, objective, workers=48, max_trials=40, callbacks=[after], may_ask=may_ask,
                         poll_s=10.0)
    allowed = runner._allowed
    calls = [0]

    def counted() -> bool:
        calls[0] += 1
        return allowed()

    runner._allowed = counted  # every look at the budget, a cached refusal included
    runner.run()
    assert len(study.trials) == 40
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    assert calls[0] < 6 * 40, calls[0]  # waking every thread at every end: about 34 per trial


def test_a_worker_stops_when_other_workers_finish_the_study(tmp_path):
    """Two workers share a study (with heartbeats, so another worker's running trial holds its place) with
    a budget of 6. The second finds every place held by the first's running trials; when the first
    completes the study, the second stops (it once waited for ever)."""
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.trainers.tabular import TabularTrainer

    release = threading.Event()

    class HeldBack(TabularTrainer):
        """Six trials at once, each waiting for a signal: the first worker holds the whole budget."""
        concurrent_trials = 6

        def train(self, space, arch_text, reporter, trial_number=0):
            release.wait(timeout=60)
            return super().train(space, arch_text, reporter, trial_number)

    storage = rdb_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=1, grace_period=60).storage
    predictor, target = predictor_for(compose(["predictor=analytical"]))

    def worker(trainer, seed):
        study = optuna.create_study(study_name="shared", storage=storage, directions=["maximize", "maximize"],
                                    load_if_exists=True, sampler=optuna.samplers.RandomSampler(seed=seed))
        return Search(study, "nb201", predictor, target, shipped("prune", "none"), trainer,
                      Objectives.from_config({"metrics": ["accuracy", "throughput"]}))

    first, second = worker(HeldBack(), 0), worker(TabularTrainer(), 1)
    holding = threading.Thread(target=first.run, args=(6,), kwargs={"poll_s": 0.05})
    holding.start()
    for _ in range(400):
        if sum(t.state.name == "RUNNING" for t in first.study.get_trials(deepcopy=False)) == 6:
            break
        release.wait(0.05)
    errors = []

    def run_second():
        try:
            second.run(6, poll_s=0.05)
        except BaseException as exc:
            errors.append(exc)
            raise
    waiting = threading.Thread(target=run_second)
    waiting.start()
    waiting.join(timeout=0.5)
    assert waiting.is_alive()  # every place is held by the first worker's trials: it waits
    release.set()
    holding.join(timeout=60)
    waiting.join(timeout=30)
    assert not waiting.is_alive()
    trials = second.study.get_trials(deepcopy=False)
    assert len(trials) == 6 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)


def test_a_trial_failed_as_stale_while_it_ran_does_not_end_the_run():
    """Another worker failed this trial as stale (its heartbeat was late); telling it then raises
    UpdateFinishedTrialError, which once ended the whole search with a traceback."""
    study = optuna.create_study()

    def objective(trial, begun):
        if trial.number == 1:
            study._storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
            raise RuntimeError("its storage writes fail once the trial is finished")
        return 1.0

    TrialRunner(study, objective, workers=1, max_trials=4).run()
    states = [t.state for t in study.trials]
    assert len(states) == 4 and states.count(optuna.trial.TrialState.COMPLETE) == 3


def test_a_failing_objective_fails_its_trial_only():
    study = optuna.create_study()

    def objective(trial, begun):
        if trial.number == 1:
            raise ValueError("boom")
        return 1.0

    TrialRunner(study, objective, workers=2, max_trials=4).run()
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.FAIL) == 1 and states.count(optuna.trial.TrialState.COMPLETE) == 3
    assert "boom" in next(t for t in study.trials if t.number == 1).system_attrs["fail_reason"]


def test_a_trials_attributes_are_written_in_one_transaction(tmp_path):
    from sqlalchemy import event

    storage = rdb_storage(f"sqlite:///{tmp_path / 'a.db'}").storage
    study = optuna.create_study(storage=storage, directions=["maximize"])
    trial = study.ask()
    commits = []
    event.listen(storage.engine, "commit", lambda conn: commits.append(1))
    attrs = {f"figure_{i}": i * 1.5 for i in range(12)} | {"curve": {"1": 50.0}}
    write_user_attrs(study, trial._trial_id, attrs)
    assert len(commits) == 1
    study.tell(trial, 1.0)
    assert optuna.load_study(study_name=study.study_name, storage=storage).trials[0].user_attrs == attrs


def test_a_journal_gets_a_trials_attributes_in_one_append(tmp_path):
    from nasutil.search.storage import journal_storage

    storage = journal_storage(str(tmp_path / "j.log")).storage
    study = optuna.create_study(storage=storage, directions=["maximize"])
    trial = study.ask()
    before = (tmp_path / "j.log").read_text().count("\n")
    write_user_attrs(study, trial._trial_id, {"a": 1, "b": [1, 2], "c": "x"})
    assert (tmp_path / "j.log").read_text().count("\n") == before + 3
    study.tell(trial, 1.0)
    assert optuna.load_study(study_name=study.study_name, storage=storage).trials[0].user_attrs == {
        "a": 1, "b": [1, 2], "c": "x"}


def test_trained_candidates_are_measured_together_inside_the_quiet_block():
    """Real CPU measurements: three threads finish training at once and are measured in one batch, inside
    the trainer's quiet block; one alone is measured once it has waited its turn."""
    archs = ["|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|",
             "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|",
             "|avg_pool_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"]
    entered = []

    @contextlib.contextmanager
    def quiet():
        entered.append(1)
        yield

    measurer = Measurer("cpu", "fp32", 2, "eager", cache=False)
    queue = MeasurementQueue(measurer, quiet, batch=3, max_wait_s=120)
    results = {}

    def one(arch):
        results[arch] = queue.measure("nb201", arch)

    threads = [threading.Thread(target=one, args=(a,)) for a in archs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert len(results) == 3 and all(r["measured_latency_ms"] > 0 for r in results.values())
    assert entered == [1] and queue.batches == 1
    assert sorted((r["measured_batch"], r["measured_in_batch"]) for r in results.values()) == [(0, 0), (0, 1), (0, 2)]
    spent = queue.activity()  # where the batch's time went: one settling reading and three kept, in the worker
    assert (spent["batches"], spent["measured"], spent["settle_count"], spent["measure_count"]) == (1, 3, 1, 3)
    assert 0 < spent["worker_phases_s"]["time_s"] < spent["settle_s"] + spent["measure_s"] <= spent["quiet_s"]
    # the four networks (the first twice: settling, then kept) were built before the hold, and each reading took one
    assert spent["stage_count"] == 1 and spent["worker_phases_s"]["staged_built"] == 4
    assert spent["worker_phases_s"]["staged"] == 4
    settling = spent["settle_phases_s"]  # the settling reading's own phases, counted in the sums too
    assert 0 < settling["time_s"] < spent["worker_phases_s"]["time_s"] and settling["staged"] == 1
    alone = MeasurementQueue(measurer, quiet, batch=8, max_wait_s=0.1)
    first = alone.measure("nb201", archs[0])
    assert first["measured_latency_ms"] > 0 and alone.batches == 1
    assert (first["measured_batch"], first["measured_in_batch"]) == (0, 0)
    assert (alone.measure("nb201", archs[1])["measured_batch"], alone.batches) == (1, 2)
    measurer.close()


def test_settling_measures_a_batch_s_first_candidate_once_before_its_readings_and_keeps_nothing(tmp_path):
    """Real CPU measurements: a settling measurer times a call's first candidate once, unkept, before the
    call's readings, so each reading follows the worker's own work; the settling reading is neither cached
    nor read from the cache (the next measurement of that cell is timed, the one after it is a hit)."""
    from nasutil.evaluator import Candidate, Evaluator, MeasureConfig
    from nasutil.evaluator.cache import MeasurementCache

    arch = "|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    other = "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    config = MeasureConfig(device="cpu", dtype="fp32", batch_size=2, mode="eager")
    with Evaluator(config, cache=MeasurementCache(tmp_path / "cache.db")) as evaluator:
        settled = evaluator.settle(Candidate("nb201", arch))
        assert settled.ok and settled.latency_ms > 0
        evaluator.measure(Candidate("nb201", arch))
        assert evaluator.cache_hits == 0  # settling stored nothing
        evaluator.measure(Candidate("nb201", arch))
        assert evaluator.cache_hits == 1

    order: list[tuple[str, str]] = []
    measurer = Measurer("cpu", "fp32", 2, "eager", cache=False)
    evaluator = measurer._evaluator_now()
    settle, measure = evaluator.settle, evaluator.measure
    evaluator.settle = lambda c, *a: order.append(("settle", c.arch)) or settle(c, *a)
    evaluator.measure = lambda c, *a: order.append(("read", c.arch)) or measure(c, *a)
    try:
        figures = measurer.measure_many("nb201", [other, arch])
        assert all(f["measured_latency_ms"] > 0 for f in figures)
        assert order == [("settle", other), ("read", other), ("read", arch)]
        measurer.settle = False
        order.clear()
        measurer.measure_many("nb201", [arch])
        assert order == [("read", arch)]
    finally:
        measurer.close()


def test_the_evaluator_config_group_passes_settle_through_and_refuses_a_non_boolean():
    import pytest

    from nasutil.errors import NasutilError
    from nasutil.search.measurer import optional_measurer

    assert optional_measurer(True, "cpu", "fp32", 2, "eager").settle is True
    assert optional_measurer(True, "cpu", "fp32", 2, "eager", settle=False).settle is False
    with pytest.raises(NasutilError, match="evaluator.settle must be true or false, got 'yes'"):
        optional_measurer(True, "cpu", "fp32", 2, "eager", settle="yes")
    with pytest.raises(NasutilError, match="evaluator.settle must be true or false"):  # even where nothing measures
        optional_measurer(False, "cpu", "fp32", 2, "eager", settle=1)


def test_the_measuring_worker_starts_in_the_background_and_never_inside_the_quiet_block():
    """A real worker process: `prepare` returns at once and the worker starts meanwhile (warmed, then idle);
    a queue's first batch waits for it before holding the population quiet, so the quiet block holds the
    measurement only, not the seconds a worker takes to start."""
    arch = "|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    measurer = Measurer("cpu", "fp32", 2, "eager", cache=False)
    events: list[str] = []

    @contextlib.contextmanager
    def quiet():
        events.append("quiet, worker up" if measurer._evaluator._info else "quiet, worker not up")
        yield

    queue = MeasurementQueue(measurer, quiet, batch=1)
    try:
        queue.prepare()
        assert measurer._starting.is_alive()  # it returned while the worker starts: the first trials go on
        assert queue.measure("nb201", arch)["measured_latency_ms"] > 0
        assert events == ["quiet, worker up"]
        pid = measurer._evaluator._info["pid"]
        queue.prepare()  # a second run of the same search keeps the worker it has
        assert queue.measure("nb201", arch)["measured_latency_ms"] > 0 and measurer._evaluator._info["pid"] == pid
    finally:
        queue.close()
    assert measurer._evaluator is None


def test_a_queue_without_prepare_still_starts_the_worker_before_holding_quiet():
    arch = "|skip_connect~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    measurer = Measurer("cpu", "fp32", 2, "eager", cache=False)
    seen: list[bool] = []

    @contextlib.contextmanager
    def quiet():
        seen.append(bool(measurer._evaluator and measurer._evaluator._info))
        yield

    queue = MeasurementQueue(measurer, quiet, batch=1)
    try:
        assert queue.measure("nb201", arch)["measured_latency_ms"] > 0
    finally:
        queue.close()
    assert seen == [True]


def test_a_survivor_is_measured_at_once_when_nothing_is_left_to_train():
    """Real CPU measurements: with room for 8 and 120 s to wait, a lone survivor waits while the trainer
    says candidates train or wait to, and is measured as soon as it says none does (a search's last
    survivors used to wait out the whole max_wait_s on an idle device)."""
    arch = "|nor_conv_1x1~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"
    entered = []

    @contextlib.contextmanager
    def quiet():
        entered.append(1)
        yield

    busy = threading.Event()
    busy.set()
    measurer = Measurer("cpu", "fp32", 2, "eager", cache=False)
    queue = MeasurementQueue(measurer, quiet, batch=8, max_wait_s=120, idle=lambda: not busy.is_set(), poll_s=0.01)
    assert queue.description.endswith("(at once where nothing is left to train)")
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(queue.measure("nb201", arch)))
    thread.start()
    time.sleep(0.5)
    assert result == {} and queue.batches == 0 and entered == []  # others train: it waits for company
    busy.clear()
    thread.join(timeout=60)
    assert not thread.is_alive() and result["measured_latency_ms"] > 0
    assert queue.batches == 1 and entered == [1] and result["measured_batch"] == 0
    measurer.close()


def test_a_populations_measurement_queue_asks_its_trainer_whether_anything_is_left_to_train(tmp_path):
    """The controller hands a population's measurement queue the trainer's idle() for the measuring device."""
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.trainers.tabular import TabularTrainer

    asked: list[str] = []

    class Together(TabularTrainer):
        concurrent_trials = 16

        def idle(self, device: str) -> bool:
            asked.append(device)
            return len(asked) > 1

    class Unsaid(TabularTrainer):
        concurrent_trials = 16

    assert TabularTrainer().idle("cpu") and not Unsaid().idle("cpu")  # one at a time; several, unless it says
    predictor, target = predictor_for(compose(["predictor=analytical"]))
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", directions=["maximize", "maximize"])
    measurer = Measurer("cpu", "fp32", 2, "eager", cache=False)
    search = Search(study, "nb201", predictor, target, shipped("prune", "none"), Together(),
                    Objectives.from_config({"metrics": ["accuracy", "throughput"]}), measurer=measurer)
    assert isinstance(search.measuring, MeasurementQueue) and search.measuring.batch == 4
    assert [search.measuring.idle(), search.measuring.idle()] == [False, True] and asked == ["cpu", "cpu"]
    measurer.close()


def test_the_population_note_is_said_only_where_candidates_trained_together():
    """One at a time (no rounds driven) says nothing; a population's line carries its figures, and the quiet
    holds only where survivors were measured."""
    from nasutil.search.console_report import population_note

    assert population_note(None) is None and population_note({"mean_build_ms": 3.0}) is None
    activity = {"rounds": 40, "mean_together": 3.2, "members_time_mean": 3.64, "most_together": 4,
                "membership_span_s": 12.34, "device_bound": 0.815, "quiets": 0, "quiet_s": 0.0}
    assert population_note(activity) == ("population: 3.6 candidates trained at once on average (at most 4) over "
                                         "12.3 s; its driver waited for the device 82% of its time (near 100%: the "
                                         "device set the pace, not the host)")
    held = population_note({**activity, "quiets": 1, "quiet_s": 0.84})
    assert held.endswith("; held quiet 0.8 s to measure 1 batch of survivors")


def test_an_architecture_another_trial_is_training_is_not_trained_twice(tmp_path):
    """Two workers on one study are given the same architecture at once (enqueued, as a sampler might
    propose it): the second waits for the first's training and records a repeat of it."""
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.trainers.tabular import TabularTrainer

    trained, started = [], threading.Event()

    class Slow(TabularTrainer):
        def train(self, space, arch_text, reporter, trial_number=0):
            trained.append(trial_number)
            started.set()
            threading.Event().wait(1.5)
            return super().train(space, arch_text, reporter, trial_number)

    storage = rdb_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=1, grace_period=60).storage
    predictor, target = predictor_for(compose(["predictor=analytical"]))
    arch = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"
    edges = [token.split("~")[0] for part in arch.strip("|").split("|+|") for token in part.split("|")]
    names = ["edge_1<-0", "edge_2<-0", "edge_2<-1", "edge_3<-0", "edge_3<-1", "edge_3<-2"]

    def worker(seed):
        study = optuna.create_study(study_name="twins", storage=storage, directions=["maximize", "maximize"],
                                    load_if_exists=True, sampler=optuna.samplers.RandomSampler(seed=seed))
        search = Search(study, "nb201", predictor, target, shipped("prune", "none"), Slow(),
                        Objectives.from_config({"metrics": ["accuracy", "throughput"]}))
        search.twin_poll_s = 0.1
        return search

    first, second = worker(0), worker(1)
    for _ in range(2):
        first.study.enqueue_trial(dict(zip(names, edges)))
    one = threading.Thread(target=first.run, args=(2,), kwargs={"poll_s": 0.05})
    one.start()
    started.wait(30)
    two = threading.Thread(target=second.run, args=(2,), kwargs={"poll_s": 0.05})
    two.start()
    one.join(60)
    two.join(60)
    trials = first.study.get_trials(deepcopy=False)
    assert len(trials) == 2 and [t.user_attrs["arch"] for t in trials] == [arch, arch]
    assert len(trained) == 1
    assert trials[1].user_attrs["duplicate_of"] == 0 and trials[1].values == trials[0].values


def test_a_search_runs_no_more_threads_than_trials_left(monkeypatch):
    """A population of 256 (and 64 prepared ahead) ran 320 trial threads for a 64-trial budget: 256 of them
    only polled the budget, taking the interpreter from the thread that launches the population's steps."""
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.trainers.tabular import TabularTrainer

    class Wide(TabularTrainer):
        concurrent_trials = 50

    seen = []
    original = TrialRunner.__init__

    def record(self, *args, **kwargs):
        seen.append(kwargs["workers"])
        original(self, *args, **kwargs)

    monkeypatch.setattr(TrialRunner, "__init__", record)
    predictor, target = predictor_for(compose(["predictor=analytical"]))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=0))
    search = Search(study, "nb201", predictor, target, shipped("prune", "none"), Wide(),
                    Objectives.from_config({"metrics": ["accuracy", "throughput"]}))
    counts = search.run(6)
    assert counts.finished == 6 and seen == [6]
    search.run(9)  # three more: three threads
    assert seen == [6, 3] and len(study.trials) == 9


def test_a_ctrl_c_while_the_trial_threads_start_still_stops_and_waits_for_them(monkeypatch):
    """`Thread.start()` waits for the thread to begin: a Ctrl-C (or SIGTERM) landing there once skipped the
    stop, so the process exited while a trial trained, aborting in native code with the trial RUNNING."""
    import time

    import pytest

    study = optuna.create_study()
    stop = threading.Event()

    def objective(trial, begun):
        while not stop.wait(0.01):  # a training, stopped by the interrupt
            pass
        time.sleep(0.3)  # and what it records after
        raise RuntimeError("interrupted")

    runner = TrialRunner(study, objective, workers=2, max_trials=4, on_interrupt=stop.set, grace_s=10)
    started = threading.Thread.start
    calls = []

    def start_then_interrupted(self):
        started(self)
        calls.append(self)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    assert stop.is_set()
    assert study.trials and all(t.state == optuna.trial.TrialState.FAIL for t in study.trials)


def test_a_second_ctrl_c_during_the_stop_leaves_the_running_trials_as_stored(ctrl_c_reaches_python):
    """A second Ctrl-C while the interrupted trials record their end cuts the wait short. The caller then
    reports the study as it is; a trial that recorded its failure a moment later made that report wrong
    (trials.csv said `running` where the storage said FAIL). A trial left so stays RUNNING."""
    import _thread
    import time

    import pytest

    study = optuna.create_study()
    stop = threading.Event()

    def objective(trial, begun):
        while not stop.wait(0.01):  # a training, stopped by the interrupt
            pass
        time.sleep(0.5)  # the step in flight, then what it records
        raise RuntimeError("interrupted")

    def interrupt() -> None:
        stop.set()
        threading.Timer(0.1, _thread.interrupt_main).start()  # the second Ctrl-C, during the wait

    runner = TrialRunner(study, objective, workers=1, max_trials=2, on_interrupt=interrupt, grace_s=10)
    threading.Timer(0.3, _thread.interrupt_main).start()  # the first
    with pytest.raises(KeyboardInterrupt):
        runner.run()
    reported = [t.state for t in study.trials]
    time.sleep(1.0)  # the trial's thread ends meanwhile
    assert reported == [optuna.trial.TrialState.RUNNING]
    assert [t.state for t in study.trials] == reported


def test_cuda_and_cuda_0_are_one_device_to_quiet_and_idle():
    """A measurement on `cuda` holds a population on `cuda:0` quiet (as torch.device objects the two differ)."""
    from nasutil.search.trainers.torch_trainer import same_device

    assert same_device("cpu", "cpu") and same_device("cuda:1", "cuda:1")
    assert not same_device("cuda:0", "cuda:1") and not same_device("cuda", "cpu")
    import torch

    current = torch.cuda.current_device() if torch.cuda.is_available() else 0
    assert same_device("cuda", f"cuda:{current}") and not same_device("cuda", f"cuda:{current + 1}")


def test_the_trainer_hears_when_the_search_asks_no_more():
    """Once the budget is held by the trials running or ended, the trainer is told (`Trainer.closing`), and
    not before: a population's last members may then share the device so that they end together."""
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.trainers.tabular import TabularTrainer

    asked_at_closing: list[int] = []

    class Together(TabularTrainer):
        concurrent_trials = 4

        def train(self, space, arch_text, reporter, trial_number=0):
            threading.Event().wait(0.2)  # the last trials still train when the budget is found held
            return super().train(space, arch_text, reporter, trial_number)

        def closing(self) -> None:
            asked_at_closing.append(len(study.get_trials(deepcopy=False)))

    predictor, target = predictor_for(compose(["predictor=analytical"]))
    study = optuna.create_study(directions=["maximize", "maximize"], sampler=optuna.samplers.RandomSampler(seed=0))
    search = Search(study, "nb201", predictor, target, shipped("prune", "none"), Together(),
                    Objectives.from_config({"metrics": ["accuracy", "throughput"]}))
    assert search.run(10).finished == 10
    assert asked_at_closing and set(asked_at_closing) == {10}
