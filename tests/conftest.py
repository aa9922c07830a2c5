"""Shared fixtures: CLI runner, a private measurement cache, run-time plugin registrations undone after each test,
the CUDA skip marker, and loading experiment scripts."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> CliResult:
    """Run `python -m nasutil ARGS` in a subprocess, as a user would."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.run([sys.executable, "-m", "nasutil", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def ctrl_c_reaches_python():
    """Ctrl-C as a terminal delivers it, even where the suite itself was started with SIGINT ignored (a
    job started in the background by a shell, where `_thread.interrupt_main` does nothing and a test that
    waits for it waits for ever): Python's own handler here, the default action in children."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.fixture(autouse=True, scope="session")
def private_measurement_cache(tmp_path_factory):
    """Tests (and the commands they start) neither read nor fill the user's measurement cache: a result
    cached by an earlier version would otherwise stand in for a measurement."""
    saved = {name: os.environ.get(name) for name in ("NASUTIL_CACHE_DIR", "NASUTIL_CACHE_URL")}
    os.environ["NASUTIL_CACHE_DIR"] = str(tmp_path_factory.mktemp("measurement-cache"))
    os.environ.pop("NASUTIL_CACHE_URL", None)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_collection_modifyitems(config, items):
    """Without CUDA the GPU tests skip; with it they share one xdist group, so that under `-n auto --dist loadgroup`
    one worker runs them one after another and no two time the device at once."""
    mark = (pytest.mark.xdist_group("gpu") if torch.cuda.is_available()
            else pytest.mark.skip(reason="needs a CUDA device"))
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(mark)


PLUGIN_SITE = os.path.join(os.path.dirname(__file__), "plugin_site")


@pytest.fixture
def installed_plugin(monkeypatch):
    """Put the tiny third-party space (a dist-info with an entry point) on the path, as pip would."""
    path = os.pathsep.join(filter(None, [PLUGIN_SITE, os.environ.get("PYTHONPATH")]))
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.syspath_prepend(PLUGIN_SITE)
    return {"PYTHONPATH": path}


@pytest.fixture(autouse=True)
def run_time_registrations_restored():
    """What a test registers at run time (a space, predictor kind, co-location strategy or cell op) is gone
    after it: a registration left behind is listed by every later test and repeated in their worker
    processes, so a test passed alone and failed after another file's."""
    from nasutil.plugins import _REGISTRIES

    saved = {group: (registry, dict(registry._runtime), dict(registry._unbuilt))
             for group, registry in _REGISTRIES.items()}
    yield
    for group, registry in list(_REGISTRIES.items()):
        kept, runtime, unbuilt = saved.get(group, (registry, {}, {}))
        with registry._lock:  # a registry built during the test had no registrations before it
            registry._runtime.clear()
            registry._unbuilt.clear()
            if kept is registry:
                registry._runtime.update(runtime)
                registry._unbuilt.update(unbuilt)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Tests build many tiny networks, which run faster on one thread than on several contending ones."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def load_script(path: Path, name: str):
    """Import a script that is not in a package (an experiment's analysis) as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server on 127.0.0.1 (tests/postgres_server.py), one for the whole run; skipped only
    where PostgreSQL is not installed and CI did not promise it is."""
    from postgres_server import postgres_server, server_binaries

    required = bool(os.environ.get("NASUTIL_REQUIRE_POSTGRES"))
    if server_binaries() is None and not required:
        pytest.skip("PostgreSQL is not installed here (.ci/run installs Debian's postgresql package)")
    if not required:
        pytest.importorskip("psycopg", reason="the PostgreSQL driver is not installed (pip install nasutil[postgres])")
    with postgres_server() as url:
        yield url


class Recorder:
    """A trainer's reporter that keeps every (step, accuracy) and stops the training at `stop_at`."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.steps: list[tuple[int, float]] = []
        self.stop_at = stop_at

    def report(self, step: int, accuracy: float) -> None:
        from nasutil.search.controller import StoppedEarly

        self.steps.append((step, accuracy))
        if step == self.stop_at:
            raise StoppedEarly(step, accuracy, "test")


def completed_trials(db: Path) -> int:
    """COMPLETE trials in a search's SQLite study (0 while the file is not there yet)."""
    import sqlite3

    try:
        with sqlite3.connect(db, timeout=1) as con:
            return con.execute("SELECT count(*) FROM trials WHERE state='COMPLETE'").fetchone()[0]
    except sqlite3.Error:
        return 0


def kill_search_after(args: list[str], db: Path, completed: int) -> dict[int, tuple]:
    """Start `nasutil-search ARGS`, SIGKILL it once `db` holds `completed` finished trials, and return what
    the study held then: trial number -> (values, arch) of every COMPLETE trial."""
    import signal
    import time

    import optuna

    proc = subprocess.Popen([sys.executable, "-m", "nasutil.search", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while completed_trials(db) < completed and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the search ended before it could be killed: {proc.stderr.read()[-1000:]}"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    name = next(a.split("=", 1)[1] for a in args if a.startswith("study_name="))
    return {t.number: (t.values, t.user_attrs["arch"])
            for t in optuna.load_study(study_name=name, storage=f"sqlite:///{db}").trials
            if t.state == optuna.trial.TrialState.COMPLETE}


def train_in_threads(trainer, jobs, timeout: float = 300) -> dict:
    """Each (arch, reporter, trial number) trained on nb201 in a thread of its own, as Optuna's n_jobs runs
    trials; the result or the exception of each, by trial number."""
    import threading

    from nasutil.registry import get_space

    results: dict[int, object] = {}

    def one(arch, reporter, number):
        try:
            results[number] = trainer.train(get_space("nb201"), arch, reporter, trial_number=number)
        except BaseException as exc:
            results[number] = exc

    threads = [threading.Thread(target=one, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    return results
