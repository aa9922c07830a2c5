"""Evaluator results as training data for profiles: read them, check them, reduce repeats to medians.

A measurements file is untrusted: a row a profile cannot use (a field missing, of the wrong type, given
twice, or a number out of range) is skipped and counted by reason, never fitted and never a traceback.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.evaluator.config import MeasureConfig
from nasutil.files import RepeatedKey, read_text, unique_keys
from nasutil.predictor.profile_checks import (
    BATCH_SIZE_RANGE,
    LATENCY_MS_RANGE,
    MAX_NAME_CHARS,
)
from nasutil.space import MAX_NUM_CLASSES, SearchSpace

ZOO_SPACES = ("torchvision", "timm")
#: why a zoo model's row is skipped: learned models and overlap constants are fitted per cell space, on many
#: archs of one space, and a zoo "space" holds named models, not archs a space's parser takes
ZOO_REASON = "of a model zoo (torchvision, timm): a fit learns cell spaces only"
#: the memory format of a row that does not say: every row the evaluator writes gives it, and a table that
#: leaves the column out (benchmarks/predictor_data.py's) was measured at the evaluator's default
DEFAULT_CHANNELS_LAST: bool = MeasureConfig.channels_last
#: the largest measurements file read (all 15,625 nb201 cells as --out JSON lines take about 25 MB)
MAX_MEASUREMENT_FILE_BYTES = 1 << 30
#: the SM clocks (MHz) a measurement may report: one of 1e300 made every other row "below 0.95 of the highest"
MAX_SM_CLOCK_MHZ = 100_000.0
#: the number of classes of every network a prediction or a fit lists the ops of (`SearchSpace.operators`)
LISTED_NUM_CLASSES = 10
#: each number of a row a fit reads: (whole?, lowest, highest). Outside its range a row cannot be used: a
#: latency or batch size no profile can hold made the fitted profile fail to load, an input size of -4 or
#: 32.5 was read as another size (or failed with a traceback), a clock of 1e300 hid every other row
NUMBER_FIELDS: dict[str, tuple[bool, float, float]] = {
    "batch_size": (True, *BATCH_SIZE_RANGE),
    "latency_ms": (False, *LATENCY_MS_RANGE),
    "sm_clock_mhz": (False, 1.0, MAX_SM_CLOCK_MHZ),
    "input_size": (True, 1, 2**16),
    "num_classes": (True, 1, MAX_NUM_CLASSES),
}


def read_measurements(paths: Iterable[str | Path], skipped: dict[str, int] | None = None) -> list[dict]:
    """Successful measurements from evaluator outputs: JSON lines (`--json`/`--out`) or CSV.

    A row that is not a usable measurement (JSON that is not an object; no status, or one the evaluator does not
    write; a field missing, of the wrong type or given twice; a number outside `NUMBER_FIELDS`) is skipped;
    `skipped`, where given, counts the skipped rows by reason. A file that cannot be read, a line that is not
    JSON at all, or a CSV header naming a column twice is an error."""
    rows: list[object] = []  # what each line or CSV row holds; RepeatedKey for a JSON line giving a key twice
    for path in map(Path, paths):
        files = sorted(path.glob("*.csv")) + sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            text = read_text(file, "measurements file", MAX_MEASUREMENT_FILE_BYTES)  # a BOM dropped too
            if file.suffix == ".csv":
                rows += _csv_rows(text, file)
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line, object_pairs_hook=unique_keys))
                    except RepeatedKey as exc:
                        rows.append(exc)
                    except (ValueError, RecursionError):  # ValueError: a JSON error, or an integer too long
                        raise NasutilError(f"{file}:{number}: not a JSON object") from None
    out = []
    for r in rows:
        checked, reason = _measurement(r)
        if checked is not None:
            out.append(checked)
        elif reason:
            _count(skipped, reason)
    return out


def _count(skipped: dict[str, int] | None, reason: str) -> None:
    """One more row left out for `reason`, where the caller counts them (`skipped` not None)."""
    if skipped is not None:
        skipped[reason] = skipped.get(reason, 0) + 1


#: the statuses the evaluator writes: a row with another, or none, is no measurement it made
STATUSES = ("ok", "failed")


def _measurement(row: object) -> tuple[dict | None, str]:
    """A line's or CSV row's successful measurement, checked; else None and why it cannot be used, or None and ''
    for a failed measurement (which holds no latency to fit, by design). A row marked ok without a latency, one
    without a status or with one the evaluator does not write, and a JSON line that parses to a number, list or
    text are counted: they were left out without a word."""
    if isinstance(row, RepeatedKey):  # which of its two values is meant cannot be told
        return None, f"gives {row.key[:40]!r} twice"
    if not isinstance(row, dict):
        return None, "is not a JSON object"
    status = row.get("status")
    if status in (None, ""):
        return None, "has no status (ok or failed)"
    if status not in STATUSES:
        return None, "has a status other than ok or failed"
    if status != "ok":
        return None, ""
    return _checked(row)


def _csv_rows(text: str, file: Path) -> list[dict]:
    """A CSV file's rows; a header naming a column twice is an error (csv keeps the last value without a word)."""
    reader = csv.DictReader(text.splitlines())
    names = reader.fieldnames or []
    repeated = next((name for i, name in enumerate(names) if name in names[:i]), None)
    if repeated is not None:
        raise NasutilError(f"{file}: the header names column {repeated[:40]!r} twice")
    return [dict(r) for r in reader]


_REQUIRED = ("space", "arch", "device_name", "dtype", "batch_size", "mode", "latency_ms")
_TEXT = ("space", "arch", "device_name", "dtype", "mode")


def _checked(row: dict) -> tuple[dict | None, str]:
    """The row with the fields a profile needs, in their types, or None and why it cannot be used. Blank text is
    missing (a blank device name made a profile that would not load), and text longer than a profile holds
    (MAX_NAME_CHARS) cannot be used."""
    missing = [k for k in _REQUIRED if row.get(k) is None or (isinstance(row[k], str) and not row[k].strip())]
    if missing:
        return None, f"lacks {', '.join(missing)}"
    wrong = [k for k in _TEXT if not isinstance(row[k], str)]
    if wrong:
        return None, f"{wrong[0]} is not text"
    long = [k for k in _TEXT if k != "arch" and len(row[k]) > MAX_NAME_CHARS]  # an arch's parser bounds its own
    if long:
        return None, f"{long[0]} is longer than {MAX_NAME_CHARS:,} characters"
    numbers: dict[str, float | int | None] = {}
    for name, (whole, low, high) in NUMBER_FIELDS.items():
        numbers[name], reason = _number(row.get(name), name, whole, low, high)
        if reason:
            return None, reason
    channels_last, reason = _flag(row.get("channels_last"), "channels_last", DEFAULT_CHANNELS_LAST)
    if reason:
        return None, reason
    return {**row, **numbers, "channels_last": channels_last}, ""


def _flag(value: object, name: str, default: bool) -> tuple[bool | None, str]:
    """A row's true or false (`default` where it is absent), or why it cannot be one: JSON gives a boolean,
    CSV the text True or False."""
    if value in (None, ""):
        return default, ""
    if isinstance(value, bool):
        return value, ""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true", ""
    return None, f"{name} is not true or false"


def _number(value: object, name: str, whole: bool, low: float, high: float) -> tuple[float | int | None, str]:
    """A row's number (None where it is absent), or why it cannot be one: CSV gives text, JSON numbers."""
    if value in (None, ""):
        return None, ""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None, f"{name} is not a number"
    try:
        number = value if isinstance(value, int) else float(value)  # an int of any size stays exact
    except ValueError:
        return None, f"{name} is not a number"
    if isinstance(number, float) and not math.isfinite(number):
        return None, f"{name} is not a finite number"
    if whole and number != int(number):
        return None, f"{name} is not a whole number"
    if not low <= number <= high:
        shown = f"{low:,} to {high:,}" if whole else f"{low:g} to {high:g}"
        return None, f"{name} out of range ({shown})"
    return (int(number) if whole else float(number)), ""


def checked_rows(rows: Iterable[object], skipped: dict[str, int] | None = None) -> list[dict]:
    """The rows a caller hands in, each checked as `read_measurements` checks a line (its status aside: rows
    built in Python need not say ok), the others counted in `skipped` by reason: a row without a latency, or
    with a list for a device name, ended a fit with a traceback."""
    out = []
    for row in rows:
        checked, reason = _checked(row) if isinstance(row, dict) else (None, "is not a JSON object")
        if checked is not None:
            out.append(checked)
        else:
            _count(skipped, reason)
    return out


def fittable(rows: list[dict], skipped: dict[str, int] | None = None) -> list[dict]:
    """The rows a profile can be fitted on: a known dtype and mode, a known space other than the model zoos
    (ZOO_REASON) whose parser takes the arch, measured on the network a fit lists the ops of (`unlike_listing`).
    The others are left out and counted in `skipped` by reason, as `read_measurements` counts its own: one bad
    row stopped a whole fit, and one of another input size or of a zoo model was left out unsaid."""
    from nasutil.devices import DTYPES
    from nasutil.evaluator.config import MODES
    from nasutil.registry import get_space

    spaces: dict[str, object] = {}  # a space's name -> the space, or None where it is unknown
    out = []
    for row in rows:
        reason = ""
        if row["dtype"] not in DTYPES or row["mode"] not in MODES:
            reason = "an unknown dtype or mode"
        elif row["space"] in ZOO_SPACES:
            reason = ZOO_REASON
        else:
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
                    reason = unlike_listing(row, space)
                except NasutilError:
                    reason = "an arch its space does not parse"
        if not reason:
            out.append(row)
        else:
            _count(skipped, reason)
    return out


def unlike_listing(row: dict, space: SearchSpace) -> str:
    """Why a checked row measured another network than the one whose ops a fit or prediction lists (its space's
    default input size, LISTED_NUM_CLASSES classes), or in another memory format than the operator tables are
    timed in (channels_last), or '' where it did not (or does not say)."""
    if row.get("channels_last") is False:
        return "measured without channels_last, the memory format the operator tables are timed in"
    if row.get("input_size") not in (None, space.default_input_size):
        return "measured at another input size than its space's default"
    if row.get("num_classes") not in (None, LISTED_NUM_CLASSES):
        return f"measured with another number of classes than {LISTED_NUM_CLASSES}"
    return ""


def skipped_note(skipped: dict[str, int]) -> str | None:
    """One line saying which rows were left out and why, or None."""
    if not skipped:
        return None
    return (f"skipped {sum(skipped.values())} unusable measurement row(s): "
            + "; ".join(f"{n} {reason}" for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1])))


def median_latencies(rows: list[dict], min_clock_ratio: float = 0.95,
                     skipped: dict[str, int] | None = None) -> dict[tuple, dict[str, float]]:
    """(space, dtype, batch, mode) -> arch -> median latency (ms) of the measurements at full clock. The rows
    left out, a model zoo's (ZOO_REASON) and those measured below `min_clock_ratio` of their configuration's
    highest SM clock (a throttled GPU), are counted in `skipped` by reason."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("space") in ZOO_SPACES:
            _count(skipped, ZOO_REASON)
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
            else:
                _count(skipped, f"measured below {min_clock_ratio:g} of its configuration's highest SM clock")
        out[key] = {arch: statistics.median(v) for arch, v in latencies.items()}
    return out
