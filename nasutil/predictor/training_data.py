"""Evaluator results as training data for profiles: read them, check them, reduce repeats to medians."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from nasutil.errors import NasutilError

ZOO_SPACES = ("torchvision", "timm")


def read_measurements(paths: Iterable[str | Path]) -> list[dict]:
    """Successful measurements from evaluator outputs: JSON lines (`--json`/`--out`) or CSV."""
    rows: list[dict] = []
    for path in map(Path, paths):
        files = sorted(path.glob("*.csv")) + sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            try:
                text = file.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise NasutilError(f"cannot read {str(file)!r}: {exc}") from None
            if file.suffix == ".csv":
                rows += [dict(r) for r in csv.DictReader(text.splitlines())]
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        raise NasutilError(f"{file}:{number}: not a JSON object") from None
    return [_checked(r, i) for i, r in enumerate(rows, start=1)
            if isinstance(r, dict) and r.get("status") == "ok" and r.get("latency_ms") not in (None, "")]


_REQUIRED = ("space", "arch", "device_name", "dtype", "batch_size", "mode", "latency_ms")


def _checked(row: dict, number: int) -> dict:
    """A measurement row with the fields a profile needs, in their types; a one-line error otherwise."""
    missing = [k for k in _REQUIRED if row.get(k) in (None, "")]
    if missing:
        raise NasutilError(f"measurement {number} lacks {', '.join(missing)}")
    try:
        return {**row, "batch_size": int(row["batch_size"]), "latency_ms": float(row["latency_ms"]),
                "sm_clock_mhz": float(row["sm_clock_mhz"]) if row.get("sm_clock_mhz") not in (None, "") else None}
    except (TypeError, ValueError) as exc:
        raise NasutilError(f"measurement {number} has a malformed number: {exc}") from None


def median_latencies(rows: list[dict], min_clock_ratio: float = 0.95) -> dict[tuple, dict[str, float]]:
    """(space, dtype, batch, mode) -> arch -> median latency (ms) of the measurements at full clock."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("space") in ZOO_SPACES:
            continue
        groups[(r["space"], r["dtype"], r["batch_size"], r["mode"])].append(r)
    out = {}
    for key, members in groups.items():
        clocks = [m["sm_clock_mhz"] for m in members if m["sm_clock_mhz"] is not None]
        floor = min_clock_ratio * max(clocks) if clocks else 0.0
        latencies: dict[str, list[float]] = defaultdict(list)
        for m in members:
            if m["sm_clock_mhz"] is None or m["sm_clock_mhz"] >= floor:
                latencies[m["arch"]].append(m["latency_ms"])
        out[key] = {arch: statistics.median(v) for arch, v in latencies.items()}
    return out
