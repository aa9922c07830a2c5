"""Ctrl-C stops a command at any moment, in one line with exit code 130, and is never lost."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import subprocess
import sys
import time

import pytest

from nasutil.cli import interrupts

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.fixture(autouse=True)
def _ctrl_c_in_every_test(ctrl_c_reaches_python):
    """Every test here delivers a Ctrl-C (conftest.py: `ctrl_c_reaches_python`)."""


def _restore_sigint() -> None:  # in a child before it starts Python: SIGINT ignored at start stays ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the drop shown here
def test_a_ctrl_c_that_python_drops_is_still_acted_on():
    """Raised inside a finaliser, the KeyboardInterrupt is printed as "Exception ignored" and dropped;
    the command's next safe point raises it again."""

    class SignalledWhileCollected:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # give the handler a bytecode boundary inside the finaliser
                pass

    with interrupts.handled():
        thing = SignalledWhileCollected()
        del thing
        gc.collect()
        with pytest.raises(KeyboardInterrupt):
            interrupts.stop_if_requested()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_ctrl_c_during_an_import_is_held_until_it_ends(tmp_path, monkeypatch):
    module = tmp_path / "slow_to_import.py"
    module.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGINT)\nfor _ in range(10000):\n    pass\n"
                      "LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with interrupts.handled():
        import slow_to_import  # noqa: F401  (the signal arrives while it loads)

        assert slow_to_import.LOADED
        with pytest.raises(KeyboardInterrupt):
            interrupts.stop_if_requested()


def _wait_until_python_catches_sigint(pid: int, timeout_s: float = 30.0) -> None:
    """Until the interpreter has started (it then catches SIGINT). Before that the operating system's default
    action ends any process, and while Python imports its `site` module a KeyboardInterrupt is fatal to the
    interpreter itself: no program can answer those, so the delays count from here and start at 0.5 s."""
    from pathlib import Path

    status, deadline = Path(f"/proc/{pid}/status"), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in status.read_text().splitlines():
            if line.startswith("SigCgt:") and int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)):
                return
        time.sleep(0.002)
    raise AssertionError("the interpreter did not start")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("delay_s", [0.5, 1.0, 2.0, 3.5])
def test_ctrl_c_at_any_moment_of_a_search_ends_in_one_line(tmp_path, delay_s):
    """From the first imports to the trials: exit code 130, one line, and no budget run to its end."""
    proc = subprocess.Popen([sys.executable, "-m", "nasutil.search", "n_trials=100000", f"hydra.run.dir={tmp_path}",
                             "plots=false", "progress=false"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_restore_sigint)
    _wait_until_python_catches_sigint(proc.pid)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("nasutil-search: interrupted"), err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("population, stop, times", [(1, signal.SIGINT, 1), (3, signal.SIGINT, 1),
                                                     (3, signal.SIGTERM, 2)],
                         ids=["alone-ctrl-c", "population-ctrl-c", "population-sigterm-twice"])
def test_ctrl_c_while_candidates_train_stops_them_and_records_why(tmp_path, population, stop, times):
    """Exiting while a trial's thread runs a training step aborted the process ("terminate called without
    an active exception", exit -6), and the interrupted trials stayed RUNNING. Now the trainings stop
    after their step in flight, their trials fail with the reason, and the command ends in one line.
    `timeout` delivers its signal twice (to the command, then to its process group): the second once cut
    the wait short, so trials.csv said `running` of trials the storage then recorded as failed."""
    import csv
    import sqlite3

    proc = subprocess.Popen([sys.executable, "-m", "nasutil.search", "trainer=torch", "trainer.dataset=digits",
                             "trainer.epochs=50", f"trainer.population={population}", "trainer.threads=1",
                             "n_trials=100", f"hydra.run.dir={tmp_path}", "plots=false", "progress=false",
                             "prune=none"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_restore_sigint)
    _wait_until_python_catches_sigint(proc.pid)
    deadline = time.monotonic() + 120
    running = 0
    while time.monotonic() < deadline and not running:  # a trial has started training
        time.sleep(0.5)
        if (tmp_path / "study.db").exists():
            with contextlib.closing(sqlite3.connect(tmp_path / "study.db")) as db:
                try:
                    running = db.execute("select count(*) from trials where state = 'RUNNING'").fetchone()[0]
                except sqlite3.OperationalError:  # the tables are being made
                    running = 0
    assert running, "no trial started"
    time.sleep(3.0)  # into its training (50 epochs of digits take far longer)
    for _ in range(times):
        proc.send_signal(stop)  # SIGTERM (`timeout`, a batch system) once ended the process with trials RUNNING
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("nasutil-search: interrupted"), err[-2000:]
    assert "terminate called" not in err and "Traceback" not in err, err[-2000:]
    with contextlib.closing(sqlite3.connect(tmp_path / "study.db")) as db:
        states = dict(db.execute("select state, count(*) from trials group by state").fetchall())
        reasons = {r for (r,) in db.execute("select value_json from trial_user_attributes where key = 'fail_reason'")}
    assert "RUNNING" not in states and states.get("FAIL", 0) >= 1, states
    assert any("interrupted (Ctrl-C or SIGTERM) before its training ended" in r for r in reasons), reasons
    with open(tmp_path / "trials.csv", newline="") as fh:
        tabled = [row["state"] for row in csv.DictReader(fh)]
    assert {state: tabled.count(state) for state in set(tabled)} == states  # the table says what is stored


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_signals_repeated_until_the_process_ends_still_end_in_exit_130(tmp_path):
    """A batch system or an impatient user signals again and again: one that arrived after the command
    had stopped, while the interpreter tore down, ended the process by the signal (exit -15)."""
    proc = subprocess.Popen([sys.executable, "-m", "nasutil.search", "trainer=torch", "trainer.dataset=digits",
                             "trainer.epochs=50", "trainer.threads=1", "n_trials=100", f"hydra.run.dir={tmp_path}",
                             "plots=false", "progress=false", "prune=none"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_restore_sigint)
    _wait_until_python_catches_sigint(proc.pid)
    time.sleep(8.0)  # into the first trial's training
    while proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("nasutil-search: interrupted"), err[-2000:]


def test_a_signal_delivered_twice_is_one_request(monkeypatch):
    """The same request arriving twice within `SAME_REQUEST_S` raises once: a second KeyboardInterrupt would
    land in the stop that the first one began. A later one is a request of its own."""
    monkeypatch.setattr(interrupts, "SAME_REQUEST_S", 0.3)
    raised = 0
    with interrupts.handled():
        for pause_s in (0.0, 0.0, 0.5):
            time.sleep(pause_s)
            try:
                os.kill(os.getpid(), signal.SIGINT)
                for _ in range(1000):  # bytecode boundaries for the handler
                    pass
            except KeyboardInterrupt:
                raised += 1
    assert raised == 2


def test_a_ctrl_c_of_an_earlier_command_does_not_stop_the_next_where_sigint_is_ignored():
    """A process whose SIGINT is ignored (a job started in the background) never installs the handler; a
    Ctrl-C remembered from an earlier command in it must not stop the next command at its first safe point."""
    interrupts._requested.set()  # what an earlier command's Ctrl-C left behind
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts.handled():
            assert not interrupts.requested()
            interrupts.stop_if_requested()  # does not raise
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_native_crash_in_a_command_names_where_each_thread_was(tmp_path):
    """A segmentation fault inside a native library ends a command with no Python traceback; the command
    writes every thread's Python stack first, so that the report says where it happened."""
    (tmp_path / "crashing_command.py").write_text(
        "import ctypes\n\n\ndef main():\n    return ctypes.string_at(0)  # reads address 0: SIGSEGV\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), *filter(None, [env.get("PYTHONPATH")])])
    child = subprocess.run([sys.executable, "-c", "from nasutil.cli.entry import _run; _run('crashing_command', 'x')"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGSEGV, child
    assert "Fatal Python error: Segmentation fault" in child.stderr, child.stderr
    assert 'crashing_command.py", line 5 in main' in child.stderr, child.stderr
