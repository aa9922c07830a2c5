"""Worker processes sharing a study journal do not train one architecture twice at once: the later trial waits
for the running one's result and records a repeat, as on SQLite and PostgreSQL. Optuna's journal keeps no
heartbeats, and two workers with one seed once trained every candidate twice side by side; a twin whose
worker was killed (its trial stays RUNNING) is waited for only until its stamps are a grace period old."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import optuna
from optuna.trial import TrialState

from nasutil.search.storage import journal_storage

#: one worker: argv = journal, log of its trainings, n_trials, seconds each training lasts, grace period
WORKER = """
import json, os, sys, time
import optuna
from nasutil.search.build import predictor_for
from nasutil.search.config import compose, shipped
from nasutil.search.controller import Search
from nasutil.search.objectives import Objectives
from nasutil.search.storage import journal_storage
from nasutil.search.trainers.tabular import TabularTrainer

journal, log, n_trials, train_s, grace = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])

def note(*what):
    with open(log, "a") as f:
        f.write(json.dumps([os.getpid(), *what, time.time()]) + "\\n")

class Slow(TabularTrainer):
    def train(self, space, arch_text, reporter, trial_number=0):
        note("start", trial_number, arch_text)
        time.sleep(train_s)
        result = super().train(space, arch_text, reporter, trial_number)
        note("end", trial_number, arch_text)
        return result

storage = journal_storage(journal, grace_period=grace).storage
predictor, target = predictor_for(compose(["predictor=analytical"]))
study = optuna.load_study(study_name="twins", storage=storage, sampler=optuna.samplers.RandomSampler(seed=0))
search = Search(study, "nb201", predictor, target, shipped("prune", "none"), Slow(),
                Objectives.from_config({"metrics": ["accuracy", "throughput"]}))
search.twin_poll_s = 0.1
note("ready")
while not os.path.exists(journal + ".go"):  # workers start their searches together
    time.sleep(0.01)
search.run(n_trials, poll_s=0.05)
"""


def new_study(journal: Path) -> None:
    optuna.create_study(study_name="twins", storage=journal_storage(str(journal)).storage,
                        directions=["maximize", "maximize"])


def worker(journal: Path, log: Path, n_trials: int, train_s: float, grace_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WORKER, str(journal), str(log), str(n_trials), str(train_s),
                             str(grace_s)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def notes(log: Path) -> list[list]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def wait_for(what, *workers: subprocess.Popen, timeout_s: float = 60.0) -> None:
    """Until `what()` holds; a worker that ended meanwhile fails the test with its output."""
    deadline = time.monotonic() + timeout_s
    while not what():
        for process in workers:
            assert process.poll() is None, process.communicate()[0][-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def trials_of(journal: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name="twins", storage=journal_storage(str(journal)).storage).trials


def test_two_worker_processes_with_one_seed_never_train_an_architecture_twice_at_once(tmp_path):
    journal, log = tmp_path / "study.log", tmp_path / "trainings.log"
    new_study(journal)
    workers = [worker(journal, log, 6, 0.8, 3) for _ in range(2)]
    wait_for(lambda: sum(n[1] == "ready" for n in notes(log)) == 2, *workers)
    (tmp_path / "study.log.go").touch()
    for process in workers:
        output = process.communicate(timeout=60)[0]
        assert process.returncode == 0, output[-3000:]
    spans: dict[str, list[tuple[float, float]]] = {}
    starts = {(n[0], n[2]): n[4] for n in notes(log) if n[1] == "start"}
    for pid, _, number, arch, at in (n for n in notes(log) if n[1] == "end"):
        spans.setdefault(arch, []).append((starts[pid, number], at))
    for arch, times in spans.items():
        times.sort()
        assert all(end <= start for (_, end), (start, _) in pairwise(times)), (arch, times)
    trials = trials_of(journal)
    assert len(trials) == 6 and all(t.state == TrialState.COMPLETE for t in trials)
    repeats = [t for t in trials if t.user_attrs.get("duplicate_of") is not None]
    assert repeats and all(t.user_attrs["training_epochs"] == 0 for t in repeats)
    assert len(starts) + len(repeats) == 6


def test_a_twin_whose_worker_was_killed_is_waited_for_only_until_its_grace_period_ends(tmp_path):
    journal, log = tmp_path / "study.log", tmp_path / "trainings.log"
    new_study(journal)
    (tmp_path / "study.log.go").touch()
    grace_s = 2.0
    stuck = worker(journal, log, 1, 120, grace_s)  # trains its first candidate for two minutes
    wait_for(lambda: any(n[1] == "start" for n in notes(log)), stuck)
    second = worker(journal, log, 1, 0.1, grace_s)  # same seed: the same candidate
    try:
        wait_for(lambda: any(t.number == 1 and "arch" in t.user_attrs for t in trials_of(journal)), stuck, second)
        time.sleep(2 * grace_s)  # the killed worker's stamps keep its trial alive meanwhile
        assert [n[0] for n in notes(log) if n[1] == "start"] == [stuck.pid], "trained while its twin trained"
        killed = time.time()
        os.kill(stuck.pid, signal.SIGKILL)
        output = second.communicate(timeout=30)[0]
        assert second.returncode == 0, output[-3000:]
    finally:
        for process in (stuck, second):
            if process.poll() is None:
                process.kill()
            process.communicate()
    trained = [n for n in notes(log) if n[1] == "start" and n[0] == second.pid]
    assert len(trained) == 1 and killed < trained[0][4] < killed + grace_s + 3
    first, again = trials_of(journal)
    assert first.state == TrialState.RUNNING and again.state == TrialState.COMPLETE
    assert again.user_attrs["arch"] == first.user_attrs["arch"] and "duplicate_of" not in again.user_attrs
