"""The study's storage: Optuna's RDB storage on any SQLAlchemy URL, with heartbeats and retries.

A trial whose process dies stops sending heartbeats; once `grace_period` seconds pass, the next
process that touches the study marks it failed and queues a retry with the same parameters.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import optuna

from nasutil.errors import NasutilError


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL has no password we could find
        return url


def _retry_callback(max_retry: int | None) -> tuple[str, Any]:
    """Optuna renamed the stale-trial retry callback and its keyword in 4.9; support both."""
    params = inspect.signature(optuna.storages.RDBStorage.__init__).parameters
    cls = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    keyword = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in params else "failed_trial_callback"
    return keyword, cls(max_retry=max_retry)


def open_storage(url: str, heartbeat_interval: int | None = 10, grace_period: int | None = 30,
                 max_retry: int | None = 2) -> optuna.storages.RDBStorage:
    """Connect (creating the schema where needed); a one-line NasutilError if the URL cannot be used."""
    if not isinstance(url, str) or "://" not in url:
        raise NasutilError(f"storage.url must be an SQLAlchemy URL such as sqlite:///study.db, got {url!r}")
    if heartbeat_interval is not None and heartbeat_interval <= 0:
        raise NasutilError(f"storage.heartbeat_interval must be positive or null, got {heartbeat_interval}")
    if grace_period is not None and grace_period <= 0:
        raise NasutilError(f"storage.grace_period must be positive or null, got {grace_period}")
    if max_retry is not None and max_retry < 0:
        raise NasutilError(f"storage.max_retry must be >= 0 or null, got {max_retry}")
    kwargs: dict[str, Any] = {}
    if heartbeat_interval:
        kwargs.update(heartbeat_interval=int(heartbeat_interval), grace_period=grace_period and int(grace_period))
        keyword, callback = _retry_callback(max_retry)
        kwargs[keyword] = callback
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": 30}  # wait for a concurrent writer instead of failing
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental-feature notices about heartbeats
            storage = optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs, **kwargs)
        if url.startswith("sqlite"):
            _fast_sqlite(storage)
        return storage
    except Exception as exc:  # SQLAlchemy's errors, a missing driver, a bad URL: all mean "cannot use it"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        cause = exc.__cause__
        if cause is not None and str(cause).strip():
            reason = f"{reason}: {str(cause).strip().splitlines()[0]}"
        raise NasutilError(f"cannot open study storage {safe_url(url)}: {reason}") from None


def _fast_sqlite(storage: optuna.storages.RDBStorage) -> None:
    """Write-ahead logging with NORMAL sync: each of the many small commits a trial makes no longer
    waits for a disk flush, and a process that dies still loses no committed trial (only a power
    cut could drop the last commits)."""
    from sqlalchemy import event

    def on_connect(connection, _record) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(storage.engine, "connect", on_connect)
    storage.engine.dispose()  # reconnect with the pragmas
