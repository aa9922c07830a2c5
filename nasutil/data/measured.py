"""Tables of measured hardware figures, one row a network, looked up instead of measuring again.

A search scored on such a table gets the truth a GPU gave, on a machine without that GPU: the shipped
`nb201_h200` table holds every one of NAS-Bench-201's 15,625 cells measured on an H200 (see README.md
here for its settings). Any CSV that `nasutil measure --out` or the evaluator wrote is read the same way,
as plain text; nothing executable is ever loaded from a file.
"""

from __future__ import annotations

import csv
import gzip
import importlib.resources
import io
import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from nasutil.errors import NasutilError
from nasutil.files import regular_file

#: the largest measured table file read (the shipped one of every nb201 cell takes 0.4 MB compressed)
MAX_TABLE_BYTES = 1 << 30

FIGURES = ("latency_ms", "throughput_per_s", "utilization")


@dataclass(frozen=True)
class MeasuredTable:
    """Measured figures by arch string, and the configuration they were measured at."""

    name: str
    device_name: str
    dtype: str
    batch_size: int
    mode: str
    space: str | None  # the search space whose arch strings key the rows, where one is known
    note: str  # where the figures come from, for summaries
    rows: dict[str, dict[str, float]] = field(repr=False)

    def figures(self, arch: str) -> dict[str, float] | None:
        return self.rows.get(arch)


#: The tables nasutil ships, by name: (file in nasutil/data, configuration, note). README.md here says more.
SHIPPED = {
    "nb201_h200": ("nasbench201_h200_b256.csv.gz",
                   {"device_name": "NVIDIA H200", "dtype": "fp16", "batch_size": 256, "mode": "cudagraph",
                    "space": "nb201"},
                   "all 15,625 NAS-Bench-201 cells measured on an H200 on 2026-12-01 (fp16, batch 256, CUDA graph, "
                   "channels-last, 32x32 input; the evaluator's fast settings of that date, five windows of >= 2 ms; "
                   "driver 580.159.04, torch 2.11.0)"),
}


def measured_table(spec: str) -> MeasuredTable:
    """A shipped table by name (`nb201_h200`), or a CSV file in the evaluator's format (columns `arch`,
    `latency_ms`, `throughput_per_s`, `utilization`; rows with a `status` other than `ok` are skipped;
    `device_name`, `dtype`, `batch_size` and `mode` where present must be one configuration)."""
    if spec in SHIPPED:
        return _shipped(spec)
    path = Path(spec).expanduser()
    if not path.is_file():
        raise NasutilError(f"no measured table {spec!r}: name a shipped one ({', '.join(SHIPPED)}) or a CSV file")
    return _from_file(str(path.resolve()), path.stat().st_mtime_ns)


@lru_cache(maxsize=4)
def _shipped(name: str) -> MeasuredTable:
    filename, config, note = SHIPPED[name]
    resource = importlib.resources.files("nasutil.data").joinpath(filename)
    with resource.open("rb") as raw, gzip.open(raw, "rt", newline="") as text:
        rows = _rows(csv.DictReader(io.StringIO(text.read())), filename)
    return MeasuredTable(name, config["device_name"], config["dtype"], int(config["batch_size"]), config["mode"],
                         config["space"], note, rows)


@lru_cache(maxsize=4)
def _from_file(path: str, mtime_ns: int) -> MeasuredTable:
    try:
        regular_file(Path(path), "measured table", MAX_TABLE_BYTES)
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", newline="", encoding="utf-8-sig") as text:
            records = list(csv.DictReader(text))
    except (OSError, UnicodeDecodeError, csv.Error, EOFError) as exc:
        raise NasutilError(f"cannot read measured table {path}: {exc}") from None
    records = [r for r in records if (r.get("status") or "ok") == "ok"]
    config: dict[str, str] = {}
    for key in ("device_name", "dtype", "batch_size", "mode", "space"):
        values = {r.get(key) for r in records if r.get(key)}
        if len(values) > 1:
            raise NasutilError(f"measured table {path} mixes configurations: {key} is {' and '.join(sorted(values))}")
        if values:
            config[key] = values.pop()
    rows = _rows(records, path)
    batch = (config.get("batch_size") or "").strip()
    if batch and not batch.isdigit():  # `1.0` once read as "unknown" and skipped the check against the target
        raise NasutilError(f"measured table {path}: batch_size {batch[:40]!r} is not a whole number")
    return MeasuredTable(Path(path).name, config.get("device_name", "unknown device"), config.get("dtype", ""),
                         int(batch) if batch else 0, config.get("mode", ""), config.get("space"),
                         f"measurements read from {path}", rows)


def _rows(records, source: str) -> dict[str, dict[str, float]]:
    readings: dict[str, list[dict[str, float]]] = {}
    for line, record in enumerate(records, start=2):
        if not isinstance(record, dict) or "arch" not in record:
            raise NasutilError(f"measured table {source} has no `arch` column")
        figures = {}
        for key in FIGURES:
            if key not in record:
                raise NasutilError(f"measured table {source} has no `{key}` column")
            try:
                value = float(record.get(key) or "nan")
            except ValueError:
                raise NasutilError(f"measured table {source}, row {line}: {key} is not a number "
                                   f"({str(record.get(key))[:40]!r})") from None
            if not (math.isfinite(value) and value > 0):
                raise NasutilError(f"measured table {source}, row {line}: {key} must be a positive number, got "
                                   f"{str(record.get(key))[:40]!r}")
            figures[key] = value
        readings.setdefault(record["arch"], []).append(figures)
    if not readings:
        raise NasutilError(f"measured table {source} holds no measured rows")
    # an arch measured more than once (a file that `--out` appended to twice) counts the median of its
    # readings, as a profile's fit does; the last reading once won, whatever the others said
    return {arch: {key: statistics.median(r[key] for r in taken) for key in FIGURES}
            for arch, taken in readings.items()}
