"""Evaluator results as training data for profiles: read them, check them, reduce repeats to medians."""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.files import read_text
from nasutil.predictor.profile_checks import LATENCY_MS_RANGE

ZOO_SPACES = ("torchvision", "timm")
#: the largest measurements file read (all 15,625 nb201 cells as --out JSON lines take about 25 MB)
MAX_MEASUREMENT_FILE_BYTES = 1 << 30
#: the SM clocks (MHz) a measurement may report: one of 1e300 made every other row "below 0.95 of the highest"
MAX_SM_CLOCK_MHZ = 100_000.0


def read_measurements(paths: Iterable[str | Path], skipped: dict[str, int] | None = None) -> list[dict]:
    """Successful measurements from evaluator outputs: JSON lines (`--json`/`--out`) or CSV.

    A row that is not a usable measurement (a field missing or of the wrong type, a latency that is not a
    positive number) is skipped; `skipped`, where given, counts the skipped rows by reason. A file that
    cannot be read, or a line that is not JSON at all, is an error."""
    rows: list[dict] = []
    for path in map(Path, paths):
        files = sorted(path.glob("*.csv")) + sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            text = read_text(file, "measurements file", MAX_MEASUREMENT_FILE_BYTES)  # a BOM dropped too
            if file.suffix == ".csv":
                rows += [dict(r) for r in csv.DictReader(text.splitlines())]
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except (ValueError, RecursionError):  # ValueError: a JSON error, or an integer too long
                        raise NasutilError(f"{file}:{number}: not a JSON object") from None
    out = []
    for r in rows:
        if not isinstance(r, dict) or r.get("status") != "ok" or r.get("latency_ms") in (None, ""):
            continue
        checked, reason = _checked(r)
        if checked is not None:
            out.append(checked)
        elif skipped is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
    return out


_REQUIRED = ("space", "arch", "device_name", "dtype", "batch_size", "mode", "latency_ms")
_TEXT = ("space", "arch", "device_name", "dtype", "mode")


def _checked(row: dict) -> tuple[dict | None, str]:
    """The row with the fields a profile needs, in their types, or None and why it cannot be used."""
    missing = [k for k in _REQUIRED if row.get(k) in (None, "")]
    if missing:
        return None, f"lacks {', '.join(missing)}"
    wrong = [k for k in _TEXT if not isinstance(row[k], str)]
    if wrong:
        return None, f"{wrong[0]} is not text"
    try:
        batch = row["batch_size"]
        if isinstance(batch, bool) or float(batch) != int(float(batch)):
            raise ValueError(batch)
        batch, latency = int(float(batch)), float(row["latency_ms"])
        clock = row.get("sm_clock_mhz")
        clock = float(clock) if clock not in (None, "") else None
    except (TypeError, ValueError, OverflowError):
        return None, "a number field is not a number"
    low, high = LATENCY_MS_RANGE
    if batch < 1 or not (math.isfinite(latency) and low <= latency <= high) \
            or (clock is not None and not (math.isfinite(clock) and 0 < clock <= MAX_SM_CLOCK_MHZ)):
        return None, "batch size, latency or clock out of range"
    return {**row, "batch_size": batch, "latency_ms": latency, "sm_clock_mhz": clock}, ""


def fittable(rows: list[dict], skipped: dict[str, int] | None = None) -> list[dict]:
    """The rows a profile can be fitted on: a known dtype and mode, and (outside the model zoos, which a fit
    leaves aside) a known space whose parser takes the arch. The others are left out and counted in
    `skipped` by reason, as `read_measurements` counts its own: one bad row stopped a whole fit."""
    from nasutil.devices import DTYPES
    from nasutil.evaluator.config import MODES
    from nasutil.registry import get_space

    spaces: dict[str, object] = {}  # a space's name -> the space, or None where it is unknown
    out = []
    for row in rows:
        reason = ""
        if row["dtype"] not in DTYPES or row["mode"] not in MODES:
            reason = "an unknown dtype or mode"
        elif row["space"] not in ZOO_SPACES:
            if row["space"] not in spaces:
                try:
                    spaces[row["space"]] = get_space(row["space"])
                except NasutilError:
                    spaces[row["space"]] = None
            space = spaces[row["space"]]
            if space is None:
                reason = "an unknown space"
            else:
                try:
                    space.parse(row["arch"])
                except NasutilError:
                    reason = "an arch its space does not parse"
        if not reason:
            out.append(row)
        elif skipped is not None:
            skipped[reason] = skipped.get(reason, 0) + 1
    return out


def skipped_note(skipped: dict[str, int]) -> str | None:
    """One line saying which rows were left out and why, or None."""
    if not skipped:
        return None
    return (f"skipped {sum(skipped.values())} unusable measurement row(s): "
            + "; ".join(f"{n} {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1])))


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
