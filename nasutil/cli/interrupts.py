"""Ctrl-C (or SIGTERM) that always stops a command, in one line, without tearing a native library in half.

Python runs a signal handler at the next bytecode boundary of the main thread. Two places make that
unsafe or unreliable: inside an import of a native library (torch calls back into Python from C++,
and a KeyboardInterrupt raised there aborts the process), and inside a finaliser or a callback from C
code (Python prints "Exception ignored" and drops the exception, and a search would run on to its
budget). So a Ctrl-C is always remembered; it is raised at once unless an import is under way, and
the commands check for a remembered one at their safe points (after loading, after every trial).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from types import FrameType

_requested = threading.Event()
_last_signal = [0.0]  # when the last Ctrl-C or SIGTERM came (time.monotonic)
#: a signal this soon after the previous one is the same request delivered twice: `timeout` signals the command
#: and then its process group, and batch systems may signal each process of a job as well as the job
SAME_REQUEST_S = 1.0


def _importing(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    now = time.monotonic()
    if _requested.is_set() and now - _last_signal[0] < SAME_REQUEST_S:
        return  # delivered twice: a second KeyboardInterrupt would cut short the stop the first one began
    _last_signal[0] = now
    _requested.set()
    if not _importing(frame):
        raise KeyboardInterrupt


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Install the handler for the duration (main thread only, and only over Python's default one, so that
    a program embedding nasutil keeps its own); a Ctrl-C remembered from before is forgotten, also where the
    handler is not installed (SIGINT ignored, as in a job a shell started in the background): it belonged
    to an earlier command of the process, and would stop this one at its first safe point."""
    _requested.clear()
    main = threading.current_thread() is threading.main_thread()
    own = main and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    # SIGTERM (`kill`, `timeout`, a batch system ending or preempting a job) stops a command as Ctrl-C does,
    # where nobody else handles it: its default ends the process at once, trials left RUNNING
    terminate = main and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    if own:
        signal.signal(signal.SIGINT, _on_sigint)
    if terminate:
        signal.signal(signal.SIGTERM, _on_sigint)
    try:
        yield
    finally:
        if own:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if terminate:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_if_requested() -> None:
    """Raise the KeyboardInterrupt of a Ctrl-C that was held or dropped."""
    if _requested.is_set():
        raise KeyboardInterrupt


def requested() -> bool:
    """Whether a Ctrl-C came (trials failing after it failed because of it)."""
    return _requested.is_set()
