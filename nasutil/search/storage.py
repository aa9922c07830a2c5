"""The study's storage: Optuna's RDB storage on any SQLAlchemy URL (SQLite by default, PostgreSQL for
many workers), with heartbeats and retries, or Optuna's JournalStorage on a file (for clusters with a
shared file system and no database server).

A trial whose process dies stops sending heartbeats; once `grace_period` seconds pass, the next
process that touches the study marks it failed and queues a retry with the same parameters
(RDB storages only: Optuna's journal keeps no heartbeats). On a journal, each process stamps its running
trials instead (`nasutil.search.liveness`): a dead worker's trial stays RUNNING, but once its stamps stop
for `grace_period` seconds no worker waits for its result.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import json
import math
import os
import re
import threading
import time
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial

from nasutil.databases import (connect_args, first_line, refuse_another_programs_sqlite, safe_url,
                               sqlalchemy_url)
from nasutil.errors import DISK_REFUSALS, NasutilError, NasutilNotice
from nasutil.search import liveness


URL_VARIABLE = "NASUTIL_STORAGE_URL"


@dataclass(frozen=True)
class StudyStorage:
    """An opened Optuna storage, and how to name it to a user (any password masked)."""

    storage: optuna.storages.BaseStorage
    label: str
    browse: str | None = None  # what `optuna-dashboard` opens it with, where it can


def rdb_storage(url: str, heartbeat_interval: int | None = 10, grace_period: int | None = 30,
                max_retry: int | None = 2, connect_timeout_s: float | None = None) -> StudyStorage:
    """The `sqlite` and `url` config options: an SQLAlchemy URL."""
    storage = open_storage(url, heartbeat_interval, grace_period, max_retry, connect_timeout_s)
    browse = url if safe_url(url) == url else None  # a URL with a password is not printed
    return StudyStorage(storage, safe_url(url), browse)


def postgresql_storage(url: str | None = None, heartbeat_interval: int | None = 10, grace_period: int | None = 30,
                       max_retry: int | None = 2, connect_timeout_s: float | None = None) -> StudyStorage:
    """The `postgresql` config option: `storage.url`, or the URL in $NASUTIL_STORAGE_URL (which keeps a
    password out of command lines and of the run folder's saved config)."""
    url = url or os.environ.get(URL_VARIABLE)
    if not url:
        raise NasutilError(f"storage=postgresql needs a URL: set {URL_VARIABLE}=postgresql://USER:PASSWORD@HOST/DB "
                           f"or storage.url=...")
    if not url.startswith(("postgresql://", "postgresql+")):
        raise NasutilError(f"storage=postgresql needs a postgresql:// URL, got {safe_url(url)}")
    return rdb_storage(sqlalchemy_url(url), heartbeat_interval, grace_period, max_retry, connect_timeout_s)


def journal_storage(path: str, grace_period: float | None = 30) -> StudyStorage:
    """The `journal` config option: Optuna's JournalStorage on a file that every worker can reach
    (appends with file locks; no heartbeats, so a dead worker's trial stays RUNNING). Its running trials
    are stamped every `grace_period / 3` seconds, so that a trial silent for `grace_period` is told from
    a live one (None: not stamped, and no trial waits for another's result)."""
    from optuna.storages.journal import JournalFileSymlinkLock

    check_seconds("grace_period", grace_period)
    file = Path(str(path)).expanduser()
    if not file.parent.is_dir():
        raise NasutilError(f"cannot open study journal {str(file)!r}: folder {str(file.parent)!r} does not exist")
    _refuse_what_is_not_a_journal(file)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental-feature notices
            lock = JournalFileSymlinkLock(str(file))  # the lock every writer of the journal takes
            backend = WholeRecordsJournal(str(file), lock_obj=lock)
        _set_aside_a_cut_off_record(file, lock)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            storage = optuna.storages.JournalStorage(backend)
    except (OSError, ValueError) as exc:
        raise NasutilError(f"cannot open study journal {str(file)!r}: {exc}") from None
    liveness.set_grace_period(storage, grace_period)
    return StudyStorage(storage, f"journal {file}", str(file))


class WholeRecordsJournal(JournalFileBackend):
    """Optuna's journal file, where an append the disk refuses part-way (full, over quota, past the file size
    limit) leaves no cut-off record behind: it once did, and the next append (the disk having room again) joined
    the two into one broken line, after which no record could be read. The refusal is a storage error that names
    the journal. Whole records the append wrote stay (another process may have read them already); a journal
    this process could not cut back takes no more appends from it."""

    _unrestored: OSError | None = None

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        try:
            from optuna.storages.journal._file import get_lock_file
        except ImportError:  # an Optuna whose internals differ: its own append
            return super().append_logs(logs)
        if not (hasattr(self, "_lock") and hasattr(self, "_file_path")):  # likewise
            return super().append_logs(logs)
        text = ("\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n").encode("utf-8")
        try:
            if self._unrestored is not None:
                raise self._unrestored
            with get_lock_file(self._lock):  # taking the lock writes too (a link beside the journal)
                self._append(text)
        except OSError as exc:
            named = OSError(exc.errno, exc.strerror or str(exc), self._file_path)  # the journal, not its lock
            raise optuna.exceptions.StorageInternalError(f"cannot write study journal {self._file_path!r}: "
                                                         f"{named.strerror}") from named

    def _append(self, text: bytes) -> None:
        """`text` at the journal's end and flushed to the disk; where the disk refuses it, the journal is cut back
        to the end of its last whole record."""
        fd = os.open(self._file_path, os.O_WRONLY | os.O_APPEND)
        try:
            end = os.fstat(fd).st_size  # under the writers' lock: nobody else appends meanwhile
            left = memoryview(text)
            try:
                while left:
                    left = left[os.write(fd, left):]
                os.fsync(fd)
            except OSError:
                written = len(text) - len(left)
                self._cut_back(fd, end + text.rfind(b"\n", 0, written) + 1, end + written)
                raise
        finally:
            os.close(fd)

    def _cut_back(self, fd: int, keep: int, size: int) -> None:
        """Drop the cut-off record between `keep` and `size` (shortening a file takes no room on the disk)."""
        if keep == size:
            return
        try:
            os.ftruncate(fd, keep)
            os.fsync(fd)
        except OSError as exc:  # it stays until the journal is next opened, which sets it aside
            self._unrestored = exc


#: how every record of Optuna's journal begins (JSON with the operation's code first)
_JOURNAL_RECORD = re.compile(rb'\{\s*"op_code"\s*:')


def _refuse_what_is_not_a_journal(file: Path) -> None:
    """A file that exists and is not empty must begin as a study journal does, before anything reads, repairs
    or appends to it: `storage.path` pointed at another file (a study database, a picture, notes) once had
    its bytes cut off as a broken record, or a record appended to it."""
    if file.is_dir():
        raise NasutilError(f"cannot open study journal {str(file)!r}: it is a folder")
    if file.exists() and not file.is_file():  # /dev/null failed in fsync; a FIFO waited for a writer for ever
        raise NasutilError(f"cannot open study journal {str(file)!r}: it is not a regular file (a device, a pipe "
                           f"or a socket)")
    try:
        with file.open("rb") as f:
            head = f.read(64)
    except FileNotFoundError:
        return  # a new journal
    except OSError as exc:
        raise NasutilError(f"cannot open study journal {str(file)!r}: {exc.strerror or exc}") from None
    if head and not _JOURNAL_RECORD.match(head):
        raise NasutilError(f"{str(file)!r} is not a study journal (storage.path names another file): left as it "
                           f"is; give a new file or an existing journal")


def _set_aside_a_cut_off_record(file: Path, lock: Any) -> None:
    """A writer killed in the middle of an append leaves a last record without its line end; the next
    append would join the two into one broken line and make the journal unreadable. Under the writers'
    lock (no append is then half done), such a tail is moved to `<journal>.cut-off` with a warning; every
    whole record stays."""
    lock.acquire()
    try:
        size = file.stat().st_size
        if size == 0:
            return
        with file.open("rb") as f:
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            f.seek(max(0, size - (1 << 20)))
            chunk = f.read()
        cut = chunk.rfind(b"\n")
        keep = size - len(chunk) + cut + 1 if cut >= 0 else (0 if size <= len(chunk) else None)
        if keep is None:  # a last line longer than 1 MiB: not a journal this can repair
            raise ValueError("its last record is cut off and longer than 1 MiB")
        with file.open("rb") as f:
            f.seek(keep)
            tail = f.read()
        aside = file.with_name(file.name + ".cut-off")
        with aside.open("ab") as f:
            f.write(tail + b"\n")
        with file.open("r+b") as f:
            f.truncate(keep)
        warnings.warn(f"study journal {file}: its last record was cut off (a writer stopped mid-append); read up to "
                      f"the last whole record, and the {len(tail)} cut-off bytes moved to {aside}", NasutilNotice,
                      stacklevel=3)
    finally:
        lock.release()


def _retry_callback(max_retry: int | None) -> tuple[str, Any]:
    """Optuna renamed the stale-trial retry callback and its keyword in 4.9; support both."""
    params = inspect.signature(optuna.storages.RDBStorage.__init__).parameters
    cls = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    keyword = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in params else "failed_trial_callback"
    with warnings.catch_warnings():  # experimental in Optuna: a two-line warning a user cannot act on
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return keyword, cls(max_retry=max_retry)


#: the longest heartbeat interval or grace period a study storage takes (a day)
MAX_HEARTBEAT_S = 86_400


def check_seconds(name: str, value: float | None) -> None:
    """A heartbeat interval or grace period: seconds above 0 and up to a day (10**20 overflowed in the
    heartbeat threads), or None."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if value is not None and not (number and 0 < value <= MAX_HEARTBEAT_S):
        raise NasutilError(f"storage.{name} must be a number of seconds above 0 and up to {MAX_HEARTBEAT_S}, "
                           f"or null, got {value}")


def open_storage(url: str, heartbeat_interval: int | None = 10, grace_period: int | None = 30,
                 max_retry: int | None = 2, connect_timeout_s: float | None = None) -> optuna.storages.RDBStorage:
    """Connect (creating the schema where needed); a one-line NasutilError if the URL cannot be used."""
    if not isinstance(url, str) or "://" not in url:
        raise NasutilError(f"storage.url must be an SQLAlchemy URL such as sqlite:///study.db, got {url!r}")
    check_seconds("heartbeat_interval", heartbeat_interval)
    check_seconds("grace_period", grace_period)
    if max_retry is not None and max_retry < 0:
        raise NasutilError(f"storage.max_retry must be >= 0 or null, got {max_retry}")
    kwargs: dict[str, Any] = {}
    if heartbeat_interval:
        kwargs.update(heartbeat_interval=int(heartbeat_interval), grace_period=grace_period and int(grace_period))
        keyword, callback = _retry_callback(max_retry)
        kwargs[keyword] = callback
    try:
        engine_kwargs: dict[str, Any] = {"connect_args": connect_args(url, connect_timeout_s)}
    except ValueError as exc:
        raise NasutilError(f"storage.connect_timeout_s: {exc}") from None
    if url.startswith("sqlite"):
        refuse_another_programs_sqlite(url, _OPTUNA_TABLES, "study database")
    try:
        storage = _connect(url, engine_kwargs, kwargs)
        if url.startswith("sqlite"):
            _fast_sqlite(storage)
        return storage
    except Exception as exc:  # SQLAlchemy's errors, a missing driver, a bad URL: all mean "cannot use it"
        raise NasutilError(f"cannot open study storage {safe_url(url)}: {first_line(exc)}") from None


#: a table every Optuna RDB storage holds, whatever its schema version
_OPTUNA_TABLES = ("studies",)


def _connect(url: str, engine_kwargs: dict[str, Any], kwargs: dict[str, Any],
             attempts: int = 4) -> optuna.storages.RDBStorage:
    """Optuna's RDBStorage; workers starting together on a new database race to create its schema, and
    the losers see an integrity error once the winner has made it: they try again."""
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # experimental-feature notices about heartbeats
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, **kwargs)
        except (IntegrityError, ProgrammingError, OperationalError) as exc:
            # "already exists" (SQLite says so in an OperationalError): another worker made it first
            lost_race = not isinstance(exc, OperationalError) or "already exists" in str(exc)
            if not lost_race or attempt == attempts - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    raise AssertionError("unreachable")


def _fast_sqlite(storage: optuna.storages.RDBStorage) -> None:
    """SQLite made safe and quick for a study shared by threads and processes.

    Transactions begin with BEGIN IMMEDIATE, taking the write lock before they read: pysqlite would
    otherwise read outside any transaction, so two workers asking at once could both see the same
    WAITING trial (a retry, or an enqueued one) and both run it. Write-ahead logging with NORMAL sync:
    each of the many small commits a trial makes no longer waits for a disk flush, and a process that
    dies still loses no committed trial (only a power cut could drop the last commits)."""
    from sqlalchemy import event

    def on_connect(connection, _record) -> None:
        connection.isolation_level = None  # no implicit transactions: the "begin" hook opens them
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    def on_begin(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(storage.engine, "connect", on_connect)
    event.listen(storage.engine, "begin", on_begin)
    storage.engine.dispose()  # reconnect with the pragmas


class StorageStopped(NasutilError):
    """The study storage failed while a search ran: `reason`, in one line, then what stays and what to do
    (`after`), which a caller that wrote the run folder's tables says with `with_tables`."""

    def __init__(self, reason: str, after: str = "; re-run to resume once it works") -> None:
        self.reason = reason
        super().__init__(f"the study storage stopped working during the search: {reason} (the trials stored before "
                         f"stay{after})")

    def with_tables(self, after: str) -> StorageStopped:
        return StorageStopped(self.reason, after)


def stopped_mid_search(exc: BaseException, storage: optuna.storages.BaseStorage | None = None) -> StorageStopped:
    """A storage that failed while the search ran (a read-only file, a full disk, a server gone), in one line
    that says what stays."""
    file, why = storage_failure(exc, storage)
    return StorageStopped(why if file is None else f"cannot write {file!r}: {why}")


def storage_failure(exc: BaseException,
                    storage: optuna.storages.BaseStorage | None = None) -> tuple[str | None, str]:
    """Why a storage failed: the file it could not write, where known, and the reason. Optuna's error says only
    that a commit failed: the driver's words, at the end of the chain of causes, say why. SQLite says "disk I/O
    error" of a write refused for a quota or the file size limit, and names no file: `storage`'s database is
    looked at for which."""
    root = exc
    for _ in range(32):  # a chain that loops back on itself ends too
        cause = root.__cause__ or (None if root.__suppress_context__ else root.__context__)
        if cause is None:
            break
        root = cause
    if isinstance(root, OSError) and root.filename is not None:  # a journal names its file
        return str(root.filename), root.strerror or type(root).__name__
    lines = str(root).strip().splitlines()
    reason = lines[0][:200] if lines else type(root).__name__
    database = _sqlite_file(storage) if _sqlite_write_failed(root) else None
    if database is None:
        return None, reason
    refused = _refused_write_near(database)
    return (database, reason) if refused is None else (str(refused.filename), refused.strerror or reason)


def _sqlite_write_failed(exc: BaseException) -> bool:
    """SQLite could not write its files (a full disk, or an I/O error it names no cause of)."""
    import sqlite3

    name = getattr(exc, "sqlite_errorname", "") if isinstance(exc, sqlite3.Error) else ""
    return name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR")


def _sqlite_file(storage: optuna.storages.BaseStorage | None) -> str | None:
    """The database file of an SQLite storage, where it is one on this machine."""
    engine = getattr(getattr(storage, "_backend", storage), "engine", None)  # Optuna may wrap it in a cache
    if engine is None or engine.url.get_backend_name() != "sqlite" or not engine.url.database:
        return None
    return engine.url.database if Path(engine.url.database).is_file() else None


#: how much a look at why a disk refuses writes writes itself, in a file it removes
_PROBE_BYTES = 4096


def _refused_write_near(database: str) -> OSError | None:
    """Why writes of the SQLite `database` are refused, where the disk is why: one of its files (the database,
    its write-ahead log or rollback journal) has reached this process's file size limit, or a small write
    beside it is refused (a full disk, a quota, a read-only file system)."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    for file in (database, f"{database}-wal", f"{database}-journal"):
        try:
            if limit != resource.RLIM_INFINITY and os.stat(file).st_size >= limit:
                return OSError(errno.EFBIG, os.strerror(errno.EFBIG), file)
        except OSError:
            continue
    return refused_write_in(Path(database).parent, database)


def refused_write_in(folder: Path, name: str) -> OSError | None:
    """What a small write in `folder` is refused with, as an error naming `name`, where the disk refuses it
    (full, over quota, read-only, past this process's file size limit); None where it is written. The file
    written is removed."""
    probe = folder / f".nasutil-write-check-{os.getpid()}-{threading.get_ident()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return OSError(exc.errno, exc.strerror, name) if exc.errno in DISK_REFUSALS else None
    try:
        left = memoryview(bytes(_PROBE_BYTES))
        while left:  # a write cut short by a limit is refused at the next
            left = left[os.write(fd, left):]
        os.fsync(fd)
    except OSError as exc:
        return OSError(exc.errno, exc.strerror, name) if exc.errno in DISK_REFUSALS else None
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            probe.unlink()
    return None


def _storage_of(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The study's storage: an RDB storage from behind Optuna's cache, a journal as it is (its own `_backend`
    is its file)."""
    storage = study._storage
    if isinstance(storage, optuna.storages.JournalStorage):
        return storage
    return getattr(storage, "_backend", storage)


def tells_dead_workers(study: optuna.Study) -> bool:
    """Whether the study's storage tells a dead worker's running trial from a live one: by heartbeats (an RDB
    storage), or by the stamps of a journal opened with a grace period."""
    return has_heartbeats(study) or liveness.grace_period(_storage_of(study)) is not None


def worker_alive(study: optuna.Study, trial: FrozenTrial) -> bool:
    """Whether a RUNNING trial's worker still shows signs of life: on a journal, a stamp within its grace period;
    elsewhere True (heartbeats get a dead worker's trial failed, which ends it)."""
    grace_s = liveness.grace_period(_storage_of(study))
    return grace_s is None or liveness.alive(trial, grace_s)


def has_heartbeats(study: optuna.Study) -> bool:
    """Whether the study's storage records heartbeats, so that a dead worker's trials get failed."""
    storage = getattr(study._storage, "_backend", study._storage)
    return isinstance(storage, optuna.storages.RDBStorage) and storage.heartbeat_interval is not None


#: when each study of a storage (by its id) was last looked over for stale trials, in this process
_LAST_STALE_CHECK: weakref.WeakKeyDictionary[Any, dict[int, float]] = weakref.WeakKeyDictionary()


def fail_stale_and_orphaned_trials(study: optuna.Study, min_interval_s: float | None = None) -> None:
    """Optuna's `fail_stale_trials`, and the same for a RUNNING trial that never sent a heartbeat for
    longer than the grace period (its process died between creating it and starting its heartbeat,
    which Optuna cannot tell from a live one): failed, and retried by the storage's callback.

    A trial turns stale only after `grace_period` seconds without a heartbeat, so looking more often
    than every half heartbeat interval (`min_interval_s` by default) finds nothing new: a population's
    many trial threads each look before they ask, and every look reads the study's running trials."""
    import copy
    import datetime

    if not has_heartbeats(study):
        return
    storage = getattr(study._storage, "_backend", study._storage)
    interval = storage.heartbeat_interval / 2 if min_interval_s is None else min_interval_s
    checked, now_s = _LAST_STALE_CHECK.setdefault(storage, {}), time.monotonic()
    if now_s - checked.get(study._study_id, -math.inf) < interval:
        return
    checked[study._study_id] = now_s
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-feature notices
        optuna.storages.fail_stale_trials(study)
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    grace = datetime.timedelta(seconds=storage.grace_period or 2 * storage.heartbeat_interval)
    now = datetime.datetime.now()  # the ORM gives datetime_start in the worker's local time
    with _create_scoped_session(storage.scoped_session) as session:
        silent = (session.query(models.TrialModel)  # one query: running trials that never sent a heartbeat
                  .filter(models.TrialModel.study_id == study._study_id,
                          models.TrialModel.state == optuna.trial.TrialState.RUNNING,
                          ~models.TrialModel.heartbeats.any()))
        orphans = [t.trial_id for t in silent if t.datetime_start is not None and now - t.datetime_start > grace]
    callback = storage.get_heartbeat_stale_trial_callback()
    for trial_id in orphans:
        try:
            if not storage.set_trial_state_values(trial_id, state=optuna.trial.TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # another worker failed it first
        if callback is not None:
            callback(study, copy.deepcopy(storage.get_trial(trial_id)))


def state_counts(study: optuna.Study) -> dict[optuna.trial.TrialState, int] | None:
    """How many of the study's trials are in each state: one counting query on an RDB storage, where
    reading the study's trials would load every running trial with all its attributes; None on any
    other storage."""
    storage = getattr(study._storage, "_backend", study._storage)
    if not isinstance(storage, optuna.storages.RDBStorage):
        return None
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session
    from sqlalchemy import func

    with _create_scoped_session(storage.scoped_session) as session:
        rows = (session.query(models.TrialModel.state, func.count(models.TrialModel.trial_id))
                .filter(models.TrialModel.study_id == study._study_id).group_by(models.TrialModel.state).all())
    return {state: count for state, count in rows}


def running_twin(study: optuna.Study, arch: str, before: int) -> int | None:
    """The id of a RUNNING trial numbered before `before` that trains `arch` (its `arch` user attribute)
    and was not pruned before training, or None. One query on an RDB storage, where reading the study's
    trials would load every running trial with all its attributes; on a journal, only a trial whose worker
    shows signs of life (`worker_alive`); None on any other storage."""
    import json

    storage = _storage_of(study)
    if isinstance(storage, optuna.storages.JournalStorage):
        return _running_journal_twin(study, storage, arch, before)
    if not isinstance(storage, optuna.storages.RDBStorage):
        return None
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    attrs = models.TrialUserAttributeModel
    with _create_scoped_session(storage.scoped_session) as session:
        found = [trial_id for (trial_id,) in session.query(models.TrialModel.trial_id)
                 .join(attrs, attrs.trial_id == models.TrialModel.trial_id)
                 .filter(models.TrialModel.study_id == study._study_id,
                         models.TrialModel.state == optuna.trial.TrialState.RUNNING,
                         models.TrialModel.number < before,
                         attrs.key == "arch", attrs.value_json == json.dumps(arch))
                 .order_by(models.TrialModel.number)]
        pruned = {trial_id for (trial_id,) in session.query(attrs.trial_id)
                  .filter(attrs.trial_id.in_(found), attrs.key == "prune_stage")} if found else set()
    return next((trial_id for trial_id in found if trial_id not in pruned), None)


def unnamed_running(study: optuna.Study, before: int) -> bool:
    """Whether a RUNNING trial numbered before `before` has not named its architecture yet (its `arch` user
    attribute): asked a moment before, it may turn out a twin. One query on an RDB storage; on a journal, only
    a trial whose worker shows signs of life counts; False on any other storage."""
    storage = _storage_of(study)
    running = optuna.trial.TrialState.RUNNING
    if isinstance(storage, optuna.storages.JournalStorage):
        return liveness.grace_period(storage) is not None and any(
            t.number < before and "arch" not in t.user_attrs and worker_alive(study, t)
            for t in storage.get_all_trials(study._study_id, deepcopy=False, states=(running,)))
    if not isinstance(storage, optuna.storages.RDBStorage):
        return False
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    attrs = models.TrialUserAttributeModel
    with _create_scoped_session(storage.scoped_session) as session:
        return session.query(models.TrialModel.trial_id).filter(
            models.TrialModel.study_id == study._study_id, models.TrialModel.state == running,
            models.TrialModel.number < before, ~models.TrialModel.user_attributes.any(attrs.key == "arch")
        ).first() is not None


def _running_journal_twin(study: optuna.Study, storage: optuna.storages.JournalStorage, arch: str,
                          before: int) -> int | None:
    """`running_twin` on a journal, which holds the study in memory: a twin whose stamps stopped is not one
    (its worker died, and its trial stays RUNNING for ever); a journal opened without a grace period has none."""
    if liveness.grace_period(storage) is None:
        return None
    running = storage.get_all_trials(study._study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    twins = [t for t in running if t.number < before and t.user_attrs.get("arch") == arch
             and "prune_stage" not in t.user_attrs and worker_alive(study, t)]
    return min(twins, key=lambda t: t.number)._trial_id if twins else None


def _upsert_user_attrs(storage: optuna.storages.RDBStorage, session: Any, trial_id: int,
                       attrs: dict[str, Any]) -> bool:
    """All of `attrs` in one statement (SQLite and PostgreSQL's INSERT ... ON CONFLICT DO UPDATE), after one
    check that the trial may still be written: Optuna's own way looks the trial up once an attribute. False
    on another database, which then takes Optuna's way."""
    import json

    from optuna.storages._rdb import models

    if storage.engine.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif storage.engine.name == "sqlite":
        import sqlite3

        from sqlalchemy.dialects.sqlite import insert
        if sqlite3.sqlite_version_info < (3, 24, 0):  # no upsert before it
            return False
    else:
        return False
    trial = models.TrialModel.find_or_raise_by_id(trial_id, session)
    storage.check_trial_is_updatable(trial_id, trial.state)
    model = models.TrialUserAttributeModel
    rows = [{"trial_id": trial_id, "key": key, "value_json": json.dumps(value)} for key, value in attrs.items()]
    statement = insert(model).values(rows)
    session.execute(statement.on_conflict_do_update(index_elements=[model.trial_id, model.key],
                                                    set_={"value_json": statement.excluded.value_json}))
    return True


def write_user_attrs(study: optuna.Study, trial_id: int, attrs: dict[str, Any]) -> None:
    """Set several user attributes of a running trial in one write: one statement in one transaction on
    SQLite and PostgreSQL (one transaction on another RDB storage), one append to a journal, where Optuna's
    storage writes each attribute by itself. Any other storage, or an Optuna whose internals differ, gets
    one write per attribute."""
    if not attrs:
        return
    storage = _storage_of(study)
    try:
        if isinstance(storage, optuna.storages.RDBStorage):
            from optuna.storages._rdb import models
            from optuna.storages._rdb.storage import _create_scoped_session

            with _create_scoped_session(storage.scoped_session, True) as session:
                if not _upsert_user_attrs(storage, session, trial_id, attrs):
                    for key, value in attrs.items():
                        storage._set_trial_attr_without_commit(session, models.TrialUserAttributeModel, trial_id,
                                                               key, value)
            return
        if isinstance(storage, optuna.storages.JournalStorage):
            from optuna.storages.journal._storage import JournalOperation

            logs = [{"op_code": JournalOperation.SET_TRIAL_USER_ATTR, "worker_id": storage._replay_result.worker_id,
                     "trial_id": trial_id, "user_attr": {key: value}} for key, value in attrs.items()]
            with storage._thread_lock:
                storage._backend.append_logs(logs)
                storage._sync_with_backend()
            return
    except (AttributeError, ImportError, TypeError):
        pass  # another Optuna's internals: the plain way below
    for key, value in attrs.items():
        study._storage.set_trial_user_attr(trial_id, key, value)
