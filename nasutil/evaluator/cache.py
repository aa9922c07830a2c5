"""SQLite cache of successful measurements, so re-runs do not re-measure unless asked.

Keyed by space, canonical arch hash, device name, dtype, batch size, mode, memory
format, input size and torch version. Values are the Measurement's JSON (never pickles).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.evaluator.config import MeasureConfig
from nasutil.evaluator.measurement import Measurement

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    space TEXT NOT NULL, arch_hash TEXT NOT NULL, device_name TEXT NOT NULL, dtype TEXT NOT NULL,
    batch_size INTEGER NOT NULL, mode TEXT NOT NULL, channels_last INTEGER NOT NULL,
    input_size INTEGER NOT NULL, torch_version TEXT NOT NULL, per_layer INTEGER NOT NULL,
    created TEXT NOT NULL DEFAULT (datetime('now')), json TEXT NOT NULL,
    PRIMARY KEY (space, arch_hash, device_name, dtype, batch_size, mode, channels_last, input_size,
                 torch_version, per_layer)
)
"""


def default_cache_path() -> Path:
    root = os.environ.get("NASUTIL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "nasutil")
    return Path(root) / "measurements.db"


class MeasurementCache:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            self._db.execute(_SCHEMA)
            self._db.commit()
        except (OSError, sqlite3.DatabaseError) as exc:
            raise NasutilError(f"cannot use measurement cache {str(self.path)!r}: {exc}") from None

    @staticmethod
    def _key(space: str, arch_hash: str, device_name: str, torch_version: str, config: MeasureConfig,
             input_size: int) -> tuple:
        return (space, arch_hash, device_name, config.dtype, config.batch_size, config.mode,
                int(config.channels_last), input_size, torch_version, int(config.per_layer))

    def get(self, space: str, arch_hash: str, device_name: str, torch_version: str, config: MeasureConfig,
            input_size: int) -> Measurement | None:
        with self._lock:
            row = self._db.execute(
            "SELECT json FROM measurements WHERE space=? AND arch_hash=? AND device_name=? AND dtype=? AND "
                "batch_size=? AND mode=? AND channels_last=? AND input_size=? AND torch_version=? AND per_layer=?",
                self._key(space, arch_hash, device_name, torch_version, config, input_size)).fetchone()
        return Measurement.from_dict(json.loads(row[0])) if row else None

    def put(self, m: Measurement, config: MeasureConfig) -> None:
        if not m.ok or m.arch_hash is None or m.input_size is None:
            return
        key = self._key(m.space, m.arch_hash, m.device_name, m.torch_version or "", config, m.input_size)
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO measurements (space, arch_hash, device_name, dtype, batch_size, "
                             "mode, channels_last, input_size, torch_version, per_layer, json) "
                             "VALUES (?,?,?,?,?,?,?,?,?,?,?)", (*key, m.to_json()))
            self._db.commit()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]

    def close(self) -> None:
        self._db.close()
