"""The study's storage asked small questions with small queries: a population runs many trials at once,
and reading the whole study (every running trial with all its attributes) for each of a trial's
questions held the interpreter from the thread that launches the population's steps."""

from __future__ import annotations

import time

import optuna
import pytest
from optuna.trial import TrialState

from nasutil.search.liveness import ALIVE_AT, stamped_while_running
from nasutil.search.storage import (fail_stale_and_orphaned_trials, journal_storage, open_storage, running_twin,
                                    state_counts, unnamed_running, worker_alive, write_user_attrs)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _study(tmp_path, url: str | None = None, **kwargs) -> optuna.Study:
    storage = open_storage(url or f"sqlite:///{tmp_path / 'study.db'}", **kwargs)
    return optuna.create_study(storage=storage, directions=["maximize", "maximize"])


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path) -> str:
    """Each database whose statements the small questions write by hand: SQLite, and a real PostgreSQL."""
    return f"sqlite:///{tmp_path / 'study.db'}" if request.param == "sqlite" else request.getfixturevalue("postgres_url")


def _statements(study: optuna.Study) -> list[str]:
    """Every SQL statement the storage's engine runs from now on."""
    from sqlalchemy import event

    seen: list[str] = []
    event.listen(study._storage._backend.engine, "before_cursor_execute",
                 lambda _conn, _cursor, statement, *_: seen.append(statement))
    return seen


def test_a_running_twin_is_an_earlier_running_trial_of_the_same_arch_not_pruned(tmp_path, url):
    study = _study(tmp_path, url)
    finished = study.ask()
    finished.set_user_attr("arch", "a")
    study.tell(finished, [1.0, 1.0])
    pruned = study.ask()
    pruned.set_user_attr("arch", "a")
    pruned.set_user_attr("prune_stage", "before_training")
    other = study.ask()
    other.set_user_attr("arch", "b")
    twin = study.ask()
    twin.set_user_attr("arch", "a")
    later = study.ask()
    later.set_user_attr("arch", "a")

    assert running_twin(study, "a", later.number) == twin._trial_id  # the finished and the pruned are not twins
    assert running_twin(study, "a", twin.number) is None  # only trials numbered before count
    assert running_twin(study, "b", later.number) == other._trial_id
    assert running_twin(study, "c", later.number) is None
    assert running_twin(study, 'a"; --', later.number) is None  # a value, never SQL


def test_state_counts_agree_with_the_trials_read_in_full(tmp_path, url):
    study = _study(tmp_path, url)
    for values in ([1.0, 1.0], None, [2.0, 0.5]):
        trial = study.ask()
        if values is not None:
            study.tell(trial, values)
    study.tell(study.ask(), state=TrialState.PRUNED)
    study.tell(study.ask(), state=TrialState.FAIL)
    study.ask()
    study.enqueue_trial({})

    counts = state_counts(study)
    for state in TrialState:
        assert counts.get(state, 0) == len(study.get_trials(deepcopy=False, states=(state,)))
    assert counts[TrialState.RUNNING] == 2 and counts[TrialState.WAITING] == 1


def test_a_trial_asked_before_that_has_not_named_its_architecture_is_told(tmp_path, url):
    """Two workers with one seed ask at the same moment: the later trial looked for twins before the earlier
    had named its architecture, and both trained it."""
    study = _study(tmp_path, url)
    finished = study.ask()
    study.tell(finished, [1.0, 1.0])
    named = study.ask()
    named.set_user_attr("arch", "a")
    unnamed = study.ask()
    later = study.ask()
    assert not unnamed_running(study, unnamed.number)  # the finished one named none: no matter
    assert unnamed_running(study, later.number) and unnamed_running(study, later.number + 1)
    unnamed.set_user_attr("arch", "b")
    assert not unnamed_running(study, later.number) and unnamed_running(study, later.number + 1)


def test_small_questions_need_an_rdb_storage(tmp_path):
    study = optuna.create_study(storage=journal_storage(str(tmp_path / "journal.log")).storage)
    assert state_counts(study) is None


def test_a_journal_twin_counts_while_its_worker_stamps_it(tmp_path):
    """A journal keeps no heartbeats: a twin whose worker died stays RUNNING, and was never waited for, so two
    workers trained one architecture at once. Its stamps now say whether its worker still runs."""
    study = optuna.create_study(storage=journal_storage(str(tmp_path / "journal.log"), grace_period=0.6).storage)
    twin = study.ask()
    twin.set_user_attr("arch", "a")
    assert running_twin(study, "a", 10) == twin._trial_id and running_twin(study, "b", 10) is None
    with stamped_while_running(study._storage, twin._trial_id):
        time.sleep(1.5)  # past its grace period, stamped every 0.2 s
        assert running_twin(study, "a", 10) == twin._trial_id
        assert isinstance(study._storage.get_trial(twin._trial_id).system_attrs[ALIVE_AT], float)
    time.sleep(0.8)  # its worker stopped stamping: it stays RUNNING, but no trial waits for it
    stale = study._storage.get_trial(twin._trial_id)
    assert stale.state == TrialState.RUNNING and not worker_alive(study, stale)
    assert running_twin(study, "a", 10) is None
    unnamed = study.ask()
    assert unnamed_running(study, 10)
    time.sleep(0.8)
    assert not unnamed_running(study, 10)  # nor for one that never named its architecture
    study.tell(twin, 1.0)
    study.tell(unnamed, 1.0)


def test_a_journal_without_a_grace_period_is_not_stamped_and_has_no_twins(tmp_path):
    journal = tmp_path / "journal.log"
    study = optuna.create_study(storage=journal_storage(str(journal), grace_period=None).storage)
    trial = study.ask()
    trial.set_user_attr("arch", "a")
    with stamped_while_running(study._storage, trial._trial_id):
        time.sleep(0.3)
    assert running_twin(study, "a", 10) is None and ALIVE_AT not in journal.read_text()


@pytest.mark.parametrize("grace", [0, -1, 10**20, "soon", True])
def test_a_journal_grace_period_that_is_not_seconds_is_refused_in_one_line(tmp_path, grace):
    from nasutil.errors import NasutilError

    with pytest.raises(NasutilError, match="^storage.grace_period must be a number of seconds above 0"):
        journal_storage(str(tmp_path / "journal.log"), grace_period=grace)
    assert not (tmp_path / "journal.log").exists()


def test_a_stale_check_within_half_a_heartbeat_interval_queries_nothing(tmp_path):
    """A trial turns stale only after the grace period: a second look a moment later finds nothing new."""
    study = _study(tmp_path, heartbeat_interval=10, grace_period=30)
    study.ask()
    seen = _statements(study)
    fail_stale_and_orphaned_trials(study)
    assert seen, "the first look reads the study"
    looked = len(seen)
    for _ in range(20):
        fail_stale_and_orphaned_trials(study)
    assert len(seen) == looked
    fail_stale_and_orphaned_trials(study, min_interval_s=0)
    assert len(seen) > looked


def test_a_running_trial_that_never_sent_a_heartbeat_is_failed_after_the_grace_period_and_retried(tmp_path, url):
    # a grace period of 3 s: with 1 s, a loaded 2-core machine once took longer than that from the ask to the look
    study = _study(tmp_path, url, heartbeat_interval=1, grace_period=3)
    orphan = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    fail_stale_and_orphaned_trials(study, min_interval_s=0)
    assert study._storage.get_trial(orphan._trial_id).state == TrialState.RUNNING  # within its grace period
    time.sleep(3.3)
    seen = _statements(study)
    fail_stale_and_orphaned_trials(study, min_interval_s=0)
    assert study._storage.get_trial(orphan._trial_id).state == TrialState.FAIL
    retried = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert [t.params for t in retried] == [orphan.params]
    heartbeat_reads = [s for s in seen if "trial_heartbeats" in s and "FROM trial_heartbeats" in s]
    assert len(heartbeat_reads) <= 2  # one query for the silent trials, not one a running trial


@pytest.mark.parametrize("population", [16])
def test_a_population_search_reads_the_study_about_twice_a_trial(tmp_path, monkeypatch, population):
    """Each read loads every running trial with all its attributes, a population's running trials many:
    the budget, the running twin and a trial's end are asked with counting queries, and stale trials
    looked for once per half heartbeat interval (the search read the study 5.1 times a trial before;
    the ask's own read and the trial's history remain)."""
    import optuna.storages._rdb.storage as rdb

    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.trainers.tabular import TabularTrainer

    reads = []
    read = rdb.RDBStorage._get_trials
    monkeypatch.setattr(rdb.RDBStorage, "_get_trials", lambda self, *a, **k: reads.append(1) or read(self, *a, **k))

    class Together(TabularTrainer):
        concurrent_trials = population

        def train(self, space, arch_text, reporter, trial_number=0):
            time.sleep(0.02)  # trials overlap, as a population's do
            return super().train(space, arch_text, reporter, trial_number)

    study = _study(tmp_path)
    study.sampler = optuna.samplers.RandomSampler(seed=0)
    predictor, target = predictor_for(compose(["predictor=analytical"]))
    search = Search(study, "nb201", predictor, target, shipped("prune", "none"), Together(),
                    Objectives.from_config({"metrics": ["accuracy", "throughput"]}))
    seen = []
    counts = search.run(48, on_trial=lambda c, t: seen.append(c), counts_for_on_trial=False)
    assert counts.finished == 48 and len(seen) == 48 and set(seen) == {None}
    assert len(reads) <= 2.3 * 48


def test_a_trials_attributes_are_written_by_one_statement_after_one_look_at_the_trial(tmp_path, url):
    """Optuna looks the trial up again for each attribute it writes: 2 statements an attribute."""
    study = _study(tmp_path, url)
    trial = study.ask()
    trial.set_user_attr("curve", {"1": 10.0})
    seen = _statements(study)
    attrs = {f"figure_{i}": i * 1.5 for i in range(12)} | {"curve": {"1": 50.0}, "arch": "a'b\"c"}
    write_user_attrs(study, trial._trial_id, attrs)
    writes = [s for s in seen if "trial_user_attributes" in s]
    looks = [s for s in seen if s.lstrip().upper().startswith("SELECT") and "FROM trials" in s]
    assert len(writes) == 1 and len(looks) == 1
    assert study._storage.get_trial(trial._trial_id).user_attrs == attrs  # the old curve replaced
    study.tell(trial, [1.0, 1.0])
    with pytest.raises(optuna.exceptions.UpdateFinishedTrialError):
        write_user_attrs(study, trial._trial_id, {"late": 1})


def test_a_trials_end_is_told_with_the_studys_counts_unless_they_are_declined(tmp_path):
    from nasutil.search.build import predictor_for
    from nasutil.search.config import compose, shipped
    from nasutil.search.controller import Search
    from nasutil.search.objectives import Objectives
    from nasutil.search.record import Counts
    from nasutil.search.trainers.tabular import TabularTrainer

    predictor, target = predictor_for(compose(["predictor=analytical"]))
    for declined in (False, True):
        (tmp_path / str(declined)).mkdir()
        study = _study(tmp_path / str(declined))
        study.sampler = optuna.samplers.RandomSampler(seed=0)
        search = Search(study, "nb201", predictor, target, shipped("prune", "none"), TabularTrainer(),
                        Objectives.from_config({"metrics": ["accuracy", "throughput"]}))
        told = []
        assert search.run(5, on_trial=lambda c, t: told.append(c), counts_for_on_trial=not declined).finished == 5
        if declined:
            assert told == [None] * 5
        else:
            assert all(isinstance(c, Counts) for c in told) and [c.finished for c in told] == [1, 2, 3, 4, 5]
