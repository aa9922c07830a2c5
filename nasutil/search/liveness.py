"""Signs of life of a study journal's running trials.

Optuna's JournalStorage keeps no heartbeats: a trial whose worker died stays RUNNING, like one still training,
so a worker could not tell whether to wait for another's result. Here each process stamps the running trials
of a journal it opened with `journal_storage` (and its `grace_period`): one background thread appends the
wall-clock time as each trial's `ALIVE_AT` system attribute every `grace_period / 3` seconds while the trial
runs, one record per trial. A RUNNING trial last stamped (or, before its first stamp, started) more than
`grace_period` seconds ago belongs to a worker that stopped: `alive` says so, and nobody waits for it. The
machines' clocks must agree to well within the grace period (as NTP keeps them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import optuna
from optuna.trial import FrozenTrial

_logger = logging.getLogger(__name__)

#: the system attribute a running trial's last sign of life is in (seconds since the epoch)
ALIVE_AT = "nasutil:alive_at"

#: the grace period of each journal storage opened with one
_GRACE: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()


def set_grace_period(storage: optuna.storages.BaseStorage, grace_period: float | None) -> None:
    """Give a journal storage its grace period; None: its trials are never stamped, nor told dead."""
    if grace_period is None:
        _GRACE.pop(storage, None)
    else:
        _GRACE[storage] = float(grace_period)


def grace_period(storage: optuna.storages.BaseStorage) -> float | None:
    """The grace period of a journal storage whose trials are stamped, else None."""
    try:
        return _GRACE.get(storage)
    except TypeError:  # a storage that cannot be weakly referenced: none of ours
        return None


def alive(trial: FrozenTrial, grace_s: float, now: float | None = None) -> bool:
    """Whether a RUNNING trial's worker showed a sign of life within `grace_s` seconds: its last stamp, or its
    start before its first (a trial that neither has is not waited for)."""
    last = trial.system_attrs.get(ALIVE_AT)
    if not isinstance(last, (int, float)):
        last = trial.datetime_start.timestamp() if trial.datetime_start is not None else None
    if last is None:
        return False
    return (time.time() if now is None else now) - last <= grace_s


class _Stamper:
    """The one thread of a process that stamps its running journal trials, each every `grace / 3` seconds."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._running: dict[int, tuple[Any, float, dict[int, float]]] = {}  # id(storage): storage, interval, due
        self._pid: int | None = None

    def add(self, storage: Any, grace_s: float, trial_id: int) -> None:
        with self._lock:
            if self._pid != os.getpid():  # a forked child has no thread: it starts its own
                self._running.clear()
                self._pid = os.getpid()
                threading.Thread(target=self._loop, name="nasutil-journal-liveness", daemon=True).start()
            interval = grace_s / 3
            entry = self._running.setdefault(id(storage), (storage, interval, {}))
            entry[2][trial_id] = time.monotonic() + interval  # its start is its first sign of life
            self._lock.notify()

    def remove(self, storage: Any, trial_id: int) -> None:
        with self._lock:
            entry = self._running.get(id(storage))
            if entry is None:
                return
            entry[2].pop(trial_id, None)
            if not entry[2]:
                del self._running[id(storage)]

    def _loop(self) -> None:
        while True:
            with self._lock:
                due, wait = self._due(time.monotonic())
                if not due:
                    self._lock.wait(wait)
                    continue
            for storage, trial_ids in due:
                _stamp(storage, trial_ids)

    def _due(self, now: float) -> tuple[list[tuple[Any, list[int]]], float | None]:
        """The trials to stamp now, by storage (their next stamp set), or how long until the next is due."""
        due, soonest = [], None
        for storage, interval, trials in self._running.values():
            ids = [trial_id for trial_id, at in trials.items() if at <= now]
            for trial_id in ids:
                trials[trial_id] = now + interval
            if ids:
                due.append((storage, ids))
            nearest = min(trials.values())
            soonest = nearest if soonest is None else min(soonest, nearest)
        return due, None if soonest is None else max(0.0, soonest - now)


def _stamp(storage: Any, trial_ids: list[int]) -> None:
    """One append with a record for each trial. Its worker id is no thread's, so a trial that ended meanwhile
    ignores it; a journal the disk refuses is told by the trials' own writes, and stamping tries again later."""
    try:
        from optuna.storages.journal._storage import JournalOperation

        worker = f"{storage._worker_id_prefix}liveness"
        now = time.time()
        storage._backend.append_logs([{"op_code": JournalOperation.SET_TRIAL_SYSTEM_ATTR, "worker_id": worker,
                                       "trial_id": trial_id, "system_attr": {ALIVE_AT: now}}
                                      for trial_id in trial_ids])
    except Exception:  # a stamp missed only makes the trial look older
        _logger.debug("could not stamp running trials %s", trial_ids, exc_info=True)


_STAMPER = _Stamper()


@contextlib.contextmanager
def stamped_while_running(storage: optuna.storages.BaseStorage, trial_id: int) -> Iterator[None]:
    """Stamp a journal trial while the block runs (its objective); nothing on any other storage."""
    grace_s = grace_period(storage)
    if grace_s is None:
        yield
        return
    _STAMPER.add(storage, grace_s, trial_id)
    try:
        yield
    finally:
        _STAMPER.remove(storage, trial_id)
