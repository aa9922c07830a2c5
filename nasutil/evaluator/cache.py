"""A cache of successful measurements, so re-runs do not re-measure unless asked; shared by workers and
machines when it lives in a database server.

The cache is an SQLAlchemy database: a local SQLite file by default, or any URL (`--cache
postgresql://...`, `NASUTIL_CACHE_URL`) that several processes and machines reach. Results are keyed
by space, canonical arch hash, device name, dtype, batch size, mode, memory format, input size, number
of classes, counters on/off, per-layer on/off and torch version; values are the Measurement's JSON
(never pickles). Architectures with equal canonical hashes (e.g. isomorphic NAS-Bench-101 graphs) share
one result. Groups of networks run together (`nasutil.colocate`) are kept beside them, keyed by the
ordered canonical hashes of their members, the strategy asked for and the same run settings.

So that two workers never measure the same result twice, a worker claims a key before measuring it;
another that wants the key waits for the result instead. A claim expires (its worker died) after its
time to live. A cache that cannot be read or written is a warning, never a reason to lose a measurement.
"""

from __future__ import annotations

import json
import math
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path

from nasutil.databases import (connect_args, first_line, refuse_another_programs_sqlite, safe_url,
                               sqlalchemy_url)
from nasutil.errors import NasutilError
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement

KEY_COLUMNS = ("space", "arch_hash", "device_name", "dtype", "batch_size", "mode", "channels_last", "input_size",
               "num_classes", "counters", "per_layer", "torch_version")
TABLE = "measurements_v2"
CLAIMS = "measurement_claims_v1"
GROUPS = "group_measurements_v1"
GROUP_KEY_COLUMNS = ("space", "group_hash", "strategy", "fallback", "device_name", "dtype", "batch_size",
                     "channels_last", "input_size", "num_classes", "counters", "torch_version")
#: stored in the `counters` column when counters are on: 2 = converged windows (1 was one 120 ms window,
#: whose readings are not served again)
COUNTERS_METHOD = 2
URL_VARIABLE = "NASUTIL_CACHE_URL"
_INTEGER_KEYS = {"batch_size", "channels_last", "input_size", "num_classes", "counters", "per_layer", "fallback"}


def default_cache_path() -> Path:
    root = os.environ.get("NASUTIL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "nasutil")
    return Path(root) / "measurements.db"


def default_cache_location() -> str:
    """$NASUTIL_CACHE_URL where set (keeps a password off the command line), else the local SQLite file.
    A value that is no URL is refused rather than taken as a file name: a typo there would otherwise
    start an empty cache in whatever folder the command runs in."""
    url = os.environ.get(URL_VARIABLE, "").strip()
    if not url:
        return str(default_cache_path())
    if "://" not in url:
        raise NasutilError(f"{URL_VARIABLE} must be a database URL (postgresql://USER@HOST/DB or "
                           f"sqlite:///PATH), got {url!r}; for a local file use --cache PATH or NASUTIL_CACHE_DIR")
    return url


def _tables(metadata):
    from sqlalchemy import Column, Float, Integer, Table, Text

    def keys() -> list:
        return [Column(c, Integer if c in _INTEGER_KEYS else Text(), primary_key=True) for c in KEY_COLUMNS]

    # `created` is filled by the writer; the first version's SQLite files have it with a default
    results = Table(TABLE, metadata, *keys(), Column("created", Text()), Column("json", Text(), nullable=False))
    claims = Table(CLAIMS, metadata, *keys(), Column("owner", Text(), nullable=False),
                   Column("expires", Float, nullable=False))
    groups = Table(GROUPS, metadata,
                   *(Column(c, Integer if c in _INTEGER_KEYS else Text(), primary_key=True) for c in GROUP_KEY_COLUMNS),
                   Column("created", Text()), Column("json", Text(), nullable=False))
    return results, claims, groups


class MeasurementCache:
    """`location` is a file path (SQLite) or an SQLAlchemy URL; a server that does not answer within
    `connect_timeout_s` (default $NASUTIL_CONNECT_TIMEOUT_S, else 5 s) is given up."""

    def __init__(self, location: str | os.PathLike, connect_timeout_s: float | None = None) -> None:
        from sqlalchemy import MetaData, create_engine, event, text
        from sqlalchemy.exc import SQLAlchemyError

        location = str(location)
        self.is_url = "://" in location
        if self.is_url:
            url, self.path = sqlalchemy_url(location), None
            engine_kwargs: dict = {"pool_pre_ping": True, "connect_args": connect_args(url, connect_timeout_s)}
        else:
            self.path = Path(location).expanduser()
            url = f"sqlite:///{self.path}"
            engine_kwargs = {"connect_args": connect_args(url)}
        self.name = safe_url(url) if self.is_url else str(self.path)
        self._lock = threading.Lock()
        self._broken = False
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        if url.startswith("sqlite"):
            refuse_another_programs_sqlite(url, (TABLE, CLAIMS, GROUPS, "measurements"), "measurement cache")
        try:
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._engine = create_engine(url, **engine_kwargs)
            if not self.is_url:
                @event.listens_for(self._engine, "begin")
                def _immediate(conn) -> None:  # take SQLite's write lock up front: no upgrade deadlocks
                    conn.exec_driver_sql("BEGIN IMMEDIATE")

                @event.listens_for(self._engine, "connect")
                def _no_pysqlite_transactions(dbapi_connection, _record) -> None:
                    dbapi_connection.isolation_level = None
            self._results, self._claims, self._groups = _tables(MetaData())
            self._create_tables()
            with self._engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE fails now, not after the first
                conn.execute(text("SELECT 1"))   # measurement, if the file is read-only
        except (OSError, SQLAlchemyError, ImportError) as exc:
            raise NasutilError(f"cannot use measurement cache {self.name}: {first_line(exc)}") from None

    def _create_tables(self, attempts: int = 4) -> None:
        """Workers opening a new database together race to create its tables; the losers try again."""
        from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

        for attempt in range(attempts):
            try:
                self._results.metadata.create_all(self._engine)
                return
            except (IntegrityError, ProgrammingError, OperationalError) as exc:
                # SQLite reports a concurrent creator as an operational error; a server's operational
                # error is one of reaching it (a timeout, a refusal), which trying again only prolongs
                if attempt == attempts - 1 or (isinstance(exc, OperationalError) and self.is_url):
                    raise
                time.sleep(0.5 * (attempt + 1))

    @property
    def owner(self) -> str:
        """Who holds a claim: this cache in this thread (an evaluator's threads measure side by side)."""
        return f"{self._owner}:{threading.get_ident()}"

    @staticmethod
    def key(space: str, arch_hash: str, device_name: str, torch_version: str, config: MeasureConfig,
            input_size: int) -> dict:
        return dict(zip(KEY_COLUMNS, (space, arch_hash, device_name, config.dtype, config.batch_size, config.mode,
                                      int(config.channels_last), input_size, config.num_classes,
                                      COUNTERS_METHOD if config.counters else 0, int(config.per_layer),
                                      torch_version)))

    def _where(self, table, key: dict):
        from sqlalchemy import and_

        return and_(*(table.c[k] == v for k, v in key.items()))

    def _disable(self, exc: Exception) -> None:
        if not self._broken:
            print(f"nasutil: warning: measurement cache {self.name} disabled: {first_line(exc)}", file=sys.stderr)
        self._broken = True

    def get(self, space: str, arch: str, arch_hash: str, device_name: str, torch_version: str,
            config: MeasureConfig, input_size: int) -> Measurement | None:
        return self.get_key(self.key(space, arch_hash, device_name, torch_version, config, input_size), arch)

    def get_key(self, key: dict, arch: str) -> Measurement | None:
        from sqlalchemy import select
        from sqlalchemy.exc import SQLAlchemyError

        if self._broken:
            return None
        try:
            with self._lock, self._engine.connect() as conn:
                row = conn.execute(select(self._results.c.json).where(self._where(self._results, key))).first()
        except SQLAlchemyError as exc:
            self._disable(exc)
            return None
        if row is None:
            return None
        try:
            m = Measurement.from_dict(json.loads(row[0]))
        except (ValueError, TypeError, AttributeError):  # a damaged row is a miss: measured again and replaced
            return None
        latency = m.latency_ms
        if not m.ok or isinstance(latency, bool) or not isinstance(latency, (int, float)) or not (
                math.isfinite(latency) and latency > 0):
            return None
        return replace(m, arch=arch)

    def put(self, m: Measurement, config: MeasureConfig) -> None:
        if self._broken or not m.ok or m.arch_hash is None or m.input_size is None:
            return
        key = self.key(m.space, m.arch_hash, m.device_name, m.torch_version or "", config, m.input_size)
        self._upsert(self._results, key, m.to_json())

    def _upsert(self, table, key: dict, json_text: str) -> None:
        """Store a result under `key`; one measured again (--remeasure) replaces the older."""
        from sqlalchemy.exc import IntegrityError, SQLAlchemyError

        values = {**key, "created": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "json": json_text}
        try:
            with self._lock, self._engine.begin() as conn:
                try:
                    with conn.begin_nested():
                        conn.execute(table.insert().values(**values))
                except IntegrityError:
                    conn.execute(table.update().where(self._where(table, key)).values(**values))
        except SQLAlchemyError as exc:
            self._disable(exc)

    # -- groups of networks run together --------------------------------------------------------

    @staticmethod
    def group_key(space: str, arch_hashes: list[str], strategy: str, fallback: bool, device_name: str,
                  torch_version: str, config: MeasureConfig, input_size: int) -> dict:
        import hashlib

        group_hash = hashlib.sha256("\n".join(arch_hashes).encode()).hexdigest()[:32]
        return dict(zip(GROUP_KEY_COLUMNS, (space, group_hash, strategy, int(fallback), device_name, config.dtype,
                                            config.batch_size, int(config.channels_last), input_size,
                                            config.num_classes, COUNTERS_METHOD if config.counters else 0,
                                            torch_version)))

    def get_group(self, key: dict) -> dict | None:
        """A stored group result as its JSON object, or None (a damaged row is a miss)."""
        from sqlalchemy import select
        from sqlalchemy.exc import SQLAlchemyError

        if self._broken:
            return None
        try:
            with self._lock, self._engine.connect() as conn:
                row = conn.execute(select(self._groups.c.json).where(self._where(self._groups, key))).first()
        except SQLAlchemyError as exc:
            self._disable(exc)
            return None
        try:
            value = json.loads(row[0]) if row is not None else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def put_group(self, key: dict, json_text: str) -> None:
        if not self._broken:
            self._upsert(self._groups, key, json_text)

    # -- claims --------------------------------------------------------------------------------

    def claim(self, key: dict, ttl_s: float) -> bool:
        """Take `key` for this cache's owner for `ttl_s` seconds: True if no live claim of another owner holds
        it (an expired one is taken over). A broken cache claims everything: measuring twice beats waiting."""
        from sqlalchemy.exc import IntegrityError, SQLAlchemyError

        if self._broken:
            return True
        now = time.time()
        try:
            with self._lock, self._engine.begin() as conn:
                try:
                    with conn.begin_nested():
                        conn.execute(self._claims.insert().values(**key, owner=self.owner, expires=now + ttl_s))
                    return True
                except IntegrityError:
                    taken = conn.execute(self._claims.update()
                                         .where(self._where(self._claims, key))
                                         .where((self._claims.c.expires < now) | (self._claims.c.owner == self.owner))
                                         .values(owner=self.owner, expires=now + ttl_s))
                    return taken.rowcount == 1
        except SQLAlchemyError as exc:
            self._disable(exc)
            return True

    def release(self, key: dict) -> None:
        from sqlalchemy.exc import SQLAlchemyError

        if self._broken:
            return
        try:
            with self._lock, self._engine.begin() as conn:
                conn.execute(self._claims.delete().where(self._where(self._claims, key))
                             .where(self._claims.c.owner == self.owner))
        except SQLAlchemyError as exc:
            self._disable(exc)

    def __len__(self) -> int:
        from sqlalchemy import func, select

        with self._lock, self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(self._results)).scalar_one())

    def close(self) -> None:
        self._engine.dispose()
