"""One device context for every measuring worker, through CUDA MPS (Multi-Process Service).

Without MPS each worker process has a context of its own on the GPU, and the GPU switches between
contexts: with the workers' copies and captures outside their turns, an H100 read cells 1.46x what the
default settings read, so a worker's copy keeps a turn of its own; only a capture, which records, runs
between that turn and the timing's (`device_turn="split"`, the fast settings, which read the cells as one turn
did; BENCHMARKS.md, "Copies and captures side by side" and "The capture outside the turn"). Under MPS the
workers are clients of one server context: the copies and a capture that only records may run outside the
turn, and the turn holds the timing alone
(`MeasureConfig(device_turn="timing")`). On H100s that measured 600 NAS-Bench-201 cells 1.60x and 1.44x as
fast as the whole turn under MPS (two runs), within 1.59% and 2.10% of the default settings under MPS. But MPS
is not a neutral host: on one H100 every pass under it read the same cells 1.047-1.053x a plain loop timed
without it, where workers without it read about 0.96 of such a loop on other H100s (BENCHMARKS.md, "Readings
under MPS against a plain loop without it"). So readings taken under MPS rank cells within their own table
and are kept apart from (and out of the cache of) readings without it; a deployed network has a context of
its own.

`shared_device_context()` starts the control daemon for this process and the workers it starts, with its
pipe and log folders in a folder of its own, and asks it to quit at the end. It must be entered before
this process or a worker makes its CUDA context.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from nasutil.errors import NasutilError

CONTROL = "nvidia-cuda-mps-control"
#: where NVIDIA's container images put the tool when it is not on PATH
FALLBACK = Path("/usr/local/nvidia/bin") / CONTROL
VARIABLES = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")
_quitting: list[subprocess.Popen] = []  # quit requests still waiting for the clients to go


def control_program() -> str:
    """The MPS control program, or a one-line error saying it is missing."""
    found = shutil.which(CONTROL) or (str(FALLBACK) if FALLBACK.is_file() else None)
    if found is None:
        raise NasutilError(f"CUDA MPS needs {CONTROL} (NVIDIA's driver utilities) on PATH; it was not found")
    return found


@contextlib.contextmanager
def shared_device_context(folder: Path | None = None) -> Iterator[Path]:
    """Start the MPS control daemon with its pipe and log folders under `folder` (a new temporary one by
    default, left for its log), set for this process and the processes it starts; yields the folder. At the
    end the daemon is asked to quit: it does once every client (this process included) has let its context
    go, so the request is sent without waiting for it. The variables are restored whatever happens."""
    program = control_program()
    base = Path(folder) if folder is not None else Path(tempfile.mkdtemp(prefix="nasutil-mps-"))
    before = {name: os.environ.get(name) for name in VARIABLES}
    try:
        for name, sub in zip(VARIABLES, ("pipe", "log")):
            (base / sub).mkdir(parents=True, exist_ok=True)
            os.environ[name] = str(base / sub)
        try:
            started = subprocess.run([program, "-d"], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise NasutilError(f"could not start the MPS control daemon: {exc}") from None
        except BaseException:  # interrupted while it started: it may be running, so ask it to quit
            _ask_to_quit(program)
            raise
        if started.returncode != 0:
            said = (started.stderr or started.stdout).strip().splitlines()
            raise NasutilError("could not start the MPS control daemon: "
                               + (said[0] if said else f"exit status {started.returncode}"))
        try:
            yield base
        finally:
            _ask_to_quit(program)
    finally:
        _restore(before)


def server_running() -> bool:
    """Whether the daemon of this process's variables runs an MPS server: one starts when the first client
    makes its context, so after the workers have started, no server means they did not reach it."""
    try:
        listed = subprocess.run([control_program()], input="get_server_list\n", capture_output=True, text=True,
                                timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return listed.returncode == 0 and any(line.strip() for line in listed.stdout.splitlines())


def require_server() -> None:
    """A one-line error unless the workers, started by now, reached an MPS server: with contexts of their own
    their timed windows would be lengthened by each other's copies and captures."""
    if not server_running():
        raise NasutilError("the workers started without an MPS server (the daemon's log is in "
                           f"{os.environ.get('CUDA_MPS_LOG_DIRECTORY', 'its log folder')}); measure without MPS")


def _ask_to_quit(program: str) -> None:
    """Send `quit` without waiting for the daemon to act on it; earlier requests that ended are reaped."""
    _quitting[:] = [q for q in _quitting if q.poll() is None]
    try:
        quitting = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
        quitting.stdin.write(b"quit\n")
        quitting.stdin.close()
    except OSError:  # nothing listens (the daemon is gone): nothing to stop
        return
    _quitting.append(quitting)


def _restore(before: dict[str, str | None]) -> None:
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
