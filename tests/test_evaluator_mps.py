"""Starting and stopping the CUDA MPS control daemon for a run's workers (`nasutil.evaluator.mps`).

The daemon itself exists only where NVIDIA's driver utilities are installed; here a stand-in program on
PATH records how it was called, so that what the module does around it (arguments, the folders and
variables the workers inherit, the quit request, the errors) is checked on any machine. The daemon's
effect on measurements is measured on the GPU (BENCHMARKS.md, "Workers sharing one context through MPS")."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nasutil.errors import NasutilError
from nasutil.evaluator import mps


def _stand_in(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / mps.CONTROL
    program.write_text("#!/bin/sh\n" + body)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return program


@pytest.fixture
def recording(tmp_path, monkeypatch):
    """A stand-in control program that appends its arguments, its pipe folder and what it reads to a log."""
    log = tmp_path / "calls.log"
    _stand_in(tmp_path / "bin", f'echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY" >> {log}\n'
                                f'if [ "$1" != "-d" ]; then read line; echo "read=$line" >> {log}; fi\n'
                                f'if [ "$line" = get_server_list ] && [ -f {tmp_path}/server ]; then\n'
                                f'  cat {tmp_path}/server\nfi\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    for name in mps.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return log


def test_the_daemon_starts_in_a_folder_of_its_own_the_workers_inherit_it_and_it_is_asked_to_quit(recording, tmp_path):
    with mps.shared_device_context(tmp_path / "mps") as folder:
        pipe, logs = os.environ["CUDA_MPS_PIPE_DIRECTORY"], os.environ["CUDA_MPS_LOG_DIRECTORY"]
        assert (folder, Path(pipe), Path(logs)) == (tmp_path / "mps", folder / "pipe", folder / "log")
        assert Path(pipe).is_dir() and Path(logs).is_dir()
        child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['CUDA_MPS_PIPE_DIRECTORY'])"],
                               capture_output=True, text=True, check=True)
        assert child.stdout.strip() == pipe  # a worker started now reaches the same daemon
        assert recording.read_text().splitlines() == [f"args=-d pipe={pipe}"]
    assert all(name not in os.environ for name in mps.VARIABLES)
    deadline = time.monotonic() + 10
    while "read=quit" not in recording.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert recording.read_text().splitlines()[1:] == [f"args= pipe={pipe}", "read=quit"]


def test_a_daemon_that_will_not_start_is_one_line_and_leaves_the_variables_as_they_were(tmp_path, monkeypatch):
    _stand_in(tmp_path / "bin", 'echo "An instance of this daemon is already running" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("CUDA_MPS_PIPE_DIRECTORY", "/somewhere/else")
    monkeypatch.delenv("CUDA_MPS_LOG_DIRECTORY", raising=False)
    with pytest.raises(NasutilError) as raised:
        with mps.shared_device_context(tmp_path / "mps"):
            pass
    assert str(raised.value) == "could not start the MPS control daemon: An instance of this daemon is already running"
    assert os.environ["CUDA_MPS_PIPE_DIRECTORY"] == "/somewhere/else" and "CUDA_MPS_LOG_DIRECTORY" not in os.environ


def test_no_control_program_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(mps, "FALLBACK", tmp_path / "nowhere" / mps.CONTROL)
    with pytest.raises(NasutilError, match=r"^CUDA MPS needs nvidia-cuda-mps-control \(NVIDIA's driver utilities\) "
                                           r"on PATH; it was not found$"):
        mps.control_program()


def test_a_server_is_seen_only_where_the_daemon_lists_one(recording, tmp_path):
    """After the workers start, a daemon that lists no server means they made contexts of their own."""
    with mps.shared_device_context(tmp_path / "mps"):
        assert not mps.server_running()
        with pytest.raises(NasutilError, match=r"^the workers started without an MPS server \(the daemon's log is "
                                               rf"in {tmp_path / 'mps' / 'log'}\); measure without MPS$"):
            mps.require_server()
        (tmp_path / "server").write_text("4321\n")
        assert mps.server_running()
        mps.require_server()
    assert "read=get_server_list" in recording.read_text()


def test_the_variables_are_restored_when_the_run_inside_fails(recording, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_MPS_LOG_DIRECTORY", "/kept")
    with pytest.raises(RuntimeError, match="inside"):
        with mps.shared_device_context(tmp_path / "mps"):
            raise RuntimeError("inside")
    assert os.environ["CUDA_MPS_LOG_DIRECTORY"] == "/kept" and "CUDA_MPS_PIPE_DIRECTORY" not in os.environ
    deadline = time.monotonic() + 10
    while "read=quit" not in recording.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "read=quit" in recording.read_text()  # a daemon that started is asked to quit all the same
