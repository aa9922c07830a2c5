"""Ctrl-C stops a command at any moment, in one line with exit code 130, and is never lost."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time

import pytest

from nasutil.cli import interrupts

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


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
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_until_python_catches_sigint(proc.pid)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1].startswith("nasutil-search: interrupted"), err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]
