"""Many workers, one study: PostgreSQL (a real server on 127.0.0.1) and Optuna's journal file.

Each worker is a `nasutil-search` process started with the same settings and study name; together they
finish exactly `n_trials` trials, with no trial number twice, and a worker killed mid-trial loses
nothing: its trial is failed by heartbeat and retried.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

SETTINGS = ["predictor=analytical", "prune=none", "plots=false", "progress=false", "trainer.fidelities=[200]"]


def start_workers(count: int, run_root: Path, args: list[str], env: dict[str, str] | None = None) -> list:
    return [subprocess.Popen([sys.executable, "-m", "nasutil.search", *SETTINGS, *args, f"worker={i}",
                              f"hydra.run.dir={run_root / f'w{i}'}"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **(env or {})}) for i in range(count)]


def wait_all(workers: list, timeout: float = 600) -> None:
    for w in workers:
        out, err = w.communicate(timeout=timeout)
        assert w.returncode == 0, err[-2000:]


def check_study(storage, name: str, n_trials: int, spare: int = 0) -> collections.Counter:
    study = optuna.load_study(study_name=name, storage=storage)
    states = collections.Counter(t.state for t in study.trials)
    assert n_trials <= states[optuna.trial.TrialState.COMPLETE] <= n_trials + spare
    assert len({t.number for t in study.trials}) == len(study.trials)  # no trial number twice
    for t in study.trials:  # the only failures are places other workers had already taken
        if t.state == optuna.trial.TrialState.FAIL:
            assert t.user_attrs.get("surplus"), t.user_attrs.get("fail_reason")
    assert study.metric_names == ["accuracy", "throughput"]  # what optuna-dashboard shows
    return states


def test_four_workers_share_one_postgresql_study(postgres_url, tmp_path):
    started = time.perf_counter()
    wait_all(start_workers(4, tmp_path, ["storage=postgresql", "study_name=shared", "n_trials=200"],
                           env={"NASUTIL_STORAGE_URL": postgres_url}))
    check_study(postgres_url, "shared", 200)
    assert time.perf_counter() - started < 600


def test_a_worker_killed_mid_trial_loses_nothing(postgres_url, tmp_path):
    args = ["storage=postgresql", f"storage.url={postgres_url}", "study_name=killed", "n_trials=80",
            "storage.heartbeat_interval=1", "storage.grace_period=2"]
    victim, survivor = start_workers(2, tmp_path, args)
    study = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            study = optuna.load_study(study_name="killed", storage=postgres_url)
            if sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials) >= 10:
                break
        except KeyError:
            pass
        time.sleep(0.1)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    wait_all([survivor])
    study = optuna.load_study(study_name="killed", storage=postgres_url)
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL and not t.user_attrs.get("surplus")]
    for t in failed:  # the trial the kill interrupted was failed by heartbeat and retried with its parameters
        retry = [r for r in study.trials if r.system_attrs.get("failed_trial") == t.number]
        assert retry and t.params.items() <= retry[0].params.items()
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials) == 80
    assert not any(t.state == optuna.trial.TrialState.RUNNING for t in study.trials)
    assert len({t.number for t in study.trials}) == len(study.trials)


def test_three_workers_share_a_journal_file(tmp_path):
    journal = tmp_path / "study.log"
    wait_all(start_workers(3, tmp_path, ["storage=journal", f"storage.path={journal}", "study_name=journal",
                                         "n_trials=60"]))
    from optuna.storages.journal import JournalFileBackend

    # The journal keeps no heartbeats: a worker counts only the running trials that started since it
    # began, so one that joins while others' trials run may add one trial too many.
    check_study(optuna.storages.JournalStorage(JournalFileBackend(str(journal))), "journal", 60, spare=2)


@pytest.mark.parametrize("override, message", [
    (["storage=postgresql"], "storage=postgresql needs a URL"),
    (["storage=postgresql", "storage.url=sqlite:///x.db"], "needs a postgresql:// URL"),
    (["storage=postgresql", "storage.url=postgresql://nasutil:secret@127.0.0.1:9/db"],
     "cannot open study storage postgresql+psycopg://nasutil:***@127.0.0.1:9/db"),
    (["storage=journal", "storage.path=/no/such/folder/study.log"], "folder '/no/such/folder' does not exist"),
])
def test_bad_storage_settings_are_one_line_errors(tmp_path, override, message):
    env = {k: v for k, v in os.environ.items() if k != "NASUTIL_STORAGE_URL"}
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", *SETTINGS, *override, f"hydra.run.dir={tmp_path}"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr and "secret" not in proc.stderr


def test_workers_started_by_hydras_joblib_launcher_share_one_study(tmp_path):
    """`nasutil-search -m hydra/launcher=joblib worker=0,1,2`: three jobs, one shared study, exactly n_trials."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="pip install nasutil[launchers]")
    journal = tmp_path / "study.log"
    args = ["-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=3", "worker=0,1,2", "storage=journal",
            f"storage.path={journal}", "study_name=launched", "n_trials=45", f"hydra.sweep.dir={tmp_path / 'multirun'}",
            *SETTINGS]
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", *args], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(journal)))
    counts = check_study(storage, "launched", 45, spare=3)
    study = optuna.load_study(study_name="launched", storage=storage)
    workers = collections.Counter(t.user_attrs.get("worker") for t in study.trials
                                  if t.state == optuna.trial.TrialState.COMPLETE)
    assert set(workers) <= {0, 1, 2} and len(workers) >= 2, workers  # the jobs really shared the work
    assert counts


@pytest.mark.parametrize("override, message", [
    ("devices=[cuda:7]", "devices: cuda:7 is not on this machine"),
    ("devices=[tpu:0]", "unknown device 'tpu:0'"),
    ("worker=-1", "worker must be a whole number"),
])
def test_bad_worker_settings_are_one_line_errors(tmp_path, override, message):
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", override, f"hydra.run.dir={tmp_path}", *SETTINGS],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-1000:]
    assert len(proc.stderr.strip().splitlines()) == 1


def test_slurm_launcher_config_composes():
    """No SLURM here: check that the submitit launcher's config composes with the app's (a dry run)."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install nasutil[launchers]")
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", "hydra/launcher=submitit_slurm",
                           "hydra.launcher.gpus_per_node=1", "worker=1", "--cfg", "hydra"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-1000:]
    assert "SlurmLauncher" in proc.stdout and "gpus_per_node: 1" in proc.stdout


def test_a_slurm_sweep_without_slurm_is_one_line(tmp_path):
    """README's SLURM example on a machine without SLURM once ended in submitit's traceback."""
    import shutil

    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install nasutil[launchers]")
    if shutil.which("srun"):
        pytest.skip("this machine has SLURM: the sweep would be submitted")
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", "-m", "hydra/launcher=submitit_slurm", "seed=0",
                           "n_trials=2", f"hydra.sweep.dir={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        'nasutil-search: error: the launcher cannot run here: Could not detect "srun", are you indeed on a slurm '
        'cluster?'], proc.stderr[-1000:]


def test_a_wrong_password_is_a_one_line_error(postgres_url, tmp_path):
    from sqlalchemy.engine import make_url

    wrong = make_url(postgres_url).set(password="secret").render_as_string(hide_password=False)
    env = {**os.environ, "NASUTIL_STORAGE_URL": wrong}
    proc = subprocess.run([sys.executable, "-m", "nasutil.search", *SETTINGS, "storage=postgresql",
                           f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "password authentication failed" in proc.stderr and "secret" not in proc.stderr


def test_threads_asking_at_once_never_run_one_sqlite_trial_twice(tmp_path):
    """Retries and enqueued trials wait in the study; with SQLite, threads popping them together must
    each get a different one (pysqlite reads outside transactions unless the storage opens them)."""
    import threading

    from nasutil.search.storage import open_storage

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    for rep in range(5):
        storage = open_storage(f"sqlite:///{tmp_path}/race{rep}.db", heartbeat_interval=None)
        study = optuna.create_study(storage=storage, study_name="race")
        for i in range(8):
            study.enqueue_trial({"x": float(i)})
        start, asked = threading.Barrier(8), []

        def ask() -> None:
            start.wait()
            asked.append(study.ask()._trial_id)

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(asked) == sorted(set(asked)) and len(asked) == 8


def test_a_worker_that_loses_the_race_to_make_a_new_sqlite_schema_tries_again(tmp_path, monkeypatch):
    """Workers starting together on a new SQLite file race to create its tables; the loser's
    "table trials already exists" (an OperationalError in SQLite, an IntegrityError elsewhere) once ended
    it with exit code 2. The race is made certain here: the first attempt sees the winner's error."""
    from sqlalchemy.exc import OperationalError

    from nasutil.search.storage import open_storage

    real = optuna.storages.RDBStorage
    attempts = []

    def racing(*args, **kwargs):
        attempts.append(1)
        storage = real(*args, **kwargs)  # the winner has made the schema by now
        if len(attempts) == 1:
            raise OperationalError("CREATE TABLE trials", {}, Exception("table trials already exists"))
        return storage

    monkeypatch.setattr(optuna.storages, "RDBStorage", racing)
    storage = open_storage(f"sqlite:///{tmp_path / 'shared.db'}")
    assert len(attempts) == 2 and storage.get_all_studies() == []
