"""SQLite cache of successful measurements, so re-runs do not re-measure unless asked.

Keyed by space, canonical arch hash, device name, dtype, batch size, mode, memory format,
input size, number of classes, counters on/off, per-layer on/off and torch version. Values
are the Measurement's JSON (never pickles). Architectures with equal canonical hashes (e.g.
isomorphic NAS-Bench-101 graphs) share one result. A cache that cannot be read or written
is a warning, never a reason to lose a measurement.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from dataclasses import replace
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement

KEY_COLUMNS = ("space", "arch_hash", "device_name", "dtype", "batch_size", "mode", "channels_last", "input_size",
               "num_classes", "counters", "per_layer", "torch_version")
TABLE = "measurements_v2"
#: stored in the `counters` column when counters are on: 2 = converged windows (1 was one 120 ms window,
#: whose readings are not served again)
COUNTERS_METHOD = 2
_SCHEMA = (f"CREATE TABLE IF NOT EXISTS {TABLE} ({', '.join(KEY_COLUMNS)}, "
           f"created TEXT NOT NULL DEFAULT (datetime('now')), json TEXT NOT NULL, "
           f"PRIMARY KEY ({', '.join(KEY_COLUMNS)}))")
_WHERE = " AND ".join(f"{c}=?" for c in KEY_COLUMNS)


def default_cache_path() -> Path:
    root = os.environ.get("NASUTIL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "nasutil")
    return Path(root) / "measurements.db"


class MeasurementCache:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._broken = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._db.execute(_SCHEMA)
            self._db.execute("BEGIN IMMEDIATE")  # fail now, not after the first measurement, if read-only
            self._db.rollback()
        except (OSError, sqlite3.Error) as exc:
            raise NasutilError(f"cannot use measurement cache {str(self.path)!r}: {exc}") from None

    @staticmethod
    def _key(space: str, arch_hash: str, device_name: str, torch_version: str, config: MeasureConfig,
             input_size: int) -> tuple:
        return (space, arch_hash, device_name, config.dtype, config.batch_size, config.mode,
                int(config.channels_last), input_size, config.num_classes, COUNTERS_METHOD if config.counters else 0,
                int(config.per_layer), torch_version)

    def _disable(self, exc: sqlite3.Error) -> None:
        if not self._broken:
            print(f"nasutil: warning: measurement cache {str(self.path)!r} disabled: {exc}", file=sys.stderr)
        self._broken = True

    def get(self, space: str, arch: str, arch_hash: str, device_name: str, torch_version: str,
            config: MeasureConfig, input_size: int) -> Measurement | None:
        if self._broken:
            return None
        try:
            with self._lock:
                row = self._db.execute(f"SELECT json FROM {TABLE} WHERE {_WHERE}",
                                       self._key(space, arch_hash, device_name, torch_version, config,
                                                 input_size)).fetchone()
        except sqlite3.Error as exc:
            self._disable(exc)
            return None
        return replace(Measurement.from_dict(json.loads(row[0])), arch=arch) if row else None

    def put(self, m: Measurement, config: MeasureConfig) -> None:
        if self._broken or not m.ok or m.arch_hash is None or m.input_size is None:
            return
        key = self._key(m.space, m.arch_hash, m.device_name, m.torch_version or "", config, m.input_size)
        try:
            with self._lock:
                self._db.execute(f"INSERT OR REPLACE INTO {TABLE} ({', '.join(KEY_COLUMNS)}, json) "
                                 f"VALUES ({', '.join('?' * (len(KEY_COLUMNS) + 1))})", (*key, m.to_json()))
                self._db.commit()
        except sqlite3.Error as exc:
            self._disable(exc)

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute(f"SELECT COUNT(*) FROM {TABLE}").fetchone()[0]

    def close(self) -> None:
        self._db.close()
