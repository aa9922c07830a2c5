"""A codes run folder's training lock: one job trains a folder at a time, whichever front door started it
(`nasutil-codes` or `nasutil codes train`); a lock left by a job that died on this host is taken over."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from nasutil.errors import NasutilError

#: the files a run writes: a folder holding none of them held no run
RESULTS = ("run.json", "base.partial.safetensors", "base.safetensors", "code.safetensors", "history.jsonl",
           "scores.json")
LOCK = ".training.lock"


@contextlib.contextmanager
def training_lock(folder: Path) -> Iterator[bool]:
    """Hold the folder's training lock (another live job holding it is a user error; this process holding
    it already is not); yields whether the folder held no run when the job started."""
    lock = folder / LOCK
    mine = f"{socket.gethostname()} {os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)  # an OSError here (a file in the way, say) names the path given
    handle = _take(lock, folder, mine)
    if handle is None:  # this process holds it already (one front door calling the other's training)
        yield not any((folder / name).exists() for name in RESULTS)
        return
    os.write(handle, mine.encode())
    os.close(handle)
    fresh = not any((folder / name).exists() for name in RESULTS)
    try:
        yield fresh
    finally:
        if lock.is_file() and lock.read_text().strip() == mine:
            lock.unlink()


def _take(lock: Path, folder: Path, mine: str) -> int | None:
    """The lock file's handle, newly created; None where this process holds the lock already. Returns rather
    than yields from inside the `except`: an error of the training would otherwise carry the lock's
    FileExistsError as its context, and be taken for a path the user gave."""
    try:
        return os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileNotFoundError:  # a refused job removed the folder just now
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        holder = lock.read_text().strip() if lock.is_file() else ""
    host, _, pid = holder.partition(" ")
    if holder == mine:
        return None
    if host == socket.gethostname() and pid.isdigit() and not _alive(int(pid)):
        lock.unlink(missing_ok=True)  # left by a job that died: taken over
        return os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    raise NasutilError(f"{str(folder)!r} is being trained by another job ({holder or 'unknown'}); "
                       f"wait for it, or remove {LOCK} there if that job is gone")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
