"""`table`: predictions computed once and kept as a CSV file (plain text; nothing in it is executed).

`write_table` writes one from any predictor's `Prediction`s; `TablePredictor` reads one and answers with
its stored figures. Where the table names the configuration it was predicted for (columns device_name,
dtype, batch_size, mode), a target of another configuration is refused.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from functools import cached_property
from pathlib import Path
from typing import IO

from nasutil.arch import Arch
from nasutil.errors import NasutilError
from nasutil.files import regular_file
from nasutil.predictor.prediction import Prediction, PredictTarget
from nasutil.predictor.registry import Candidates, Predictor, register_predictor
from nasutil.space import SearchSpace

#: the largest prediction table read (every nb201 cell's row takes about 4 MB)
MAX_TABLE_BYTES = 1 << 30
REQUIRED = ("arch", "latency_ms", "throughput_per_s", "utilization")
POSITIVE = ("latency_ms", "throughput_per_s")  # the other figures may be 0 (a FLOP-free network), none negative
COLUMNS = ("arch", "predictor", "latency_ms", "throughput_per_s", "utilization", "flops_per_image", "params",
           "device_name", "dtype", "batch_size", "mode")


def table_row(p: Prediction) -> dict[str, object]:
    """One prediction as a table row (six significant digits, as the committed tables hold them)."""
    number = (lambda v: "" if v is None else f"{v:.6g}")
    return {"arch": p.arch, "predictor": p.predictor, "latency_ms": number(p.latency_ms),
            "throughput_per_s": number(p.throughput_per_s), "utilization": number(p.utilization),
            "flops_per_image": p.flops_per_image, "params": p.params, "device_name": p.device_name,
            "dtype": p.dtype, "batch_size": p.batch_size, "mode": p.mode}


def write_table(out: IO[str], predictions: Iterable[Prediction], header: bool = True) -> None:
    """Write predictions as CSV rows to an open text file (`header=False` to append to an existing table)."""
    writer = csv.DictWriter(out, fieldnames=COLUMNS)
    if header:
        writer.writeheader()
    writer.writerows(table_row(p) for p in predictions)


@register_predictor
class TablePredictor(Predictor):
    name = "table"
    uses_ops = False

    def __init__(self, path: str | Path, device_name: str | None = None) -> None:
        """`device_name`: the device the table's predictions are for, where its rows do not name it: its
        predictions carry that name, and a search's anchors are ranked on the device's shipped profile."""
        if device_name is not None and not isinstance(device_name, str):
            raise NasutilError(f"device_name must be a device's name (e.g. 'NVIDIA H200'), got {device_name!r}")
        self.path = Path(path)
        self._device_name = device_name or ""
        try:
            regular_file(self.path, "prediction table", MAX_TABLE_BYTES)
            with self.path.open(newline="", encoding="utf-8-sig") as f:  # a byte-order mark is no part of a column
                self.rows = list(csv.DictReader(f))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise NasutilError(f"cannot read prediction table {str(path)!r}: {exc}") from None
        missing = [c for c in REQUIRED if not self.rows or c not in self.rows[0]]
        if missing:
            raise NasutilError(f"prediction table {str(path)!r} lacks column(s) {', '.join(missing)}")
        self._by_space: dict[str, dict[str, dict[str, str]]] = {}
        named = {row.get("device_name") for row in self.rows if row.get("device_name")}
        if self._device_name and named and named != {self._device_name}:
            raise NasutilError(f"prediction table {str(path)!r} names its device ({', '.join(sorted(named))}), "
                               f"not device_name={self._device_name!r}")

    @property
    def device_name(self) -> str:
        return self.rows[0].get("device_name") or self._device_name

    @cached_property
    def content_digest(self) -> str:
        """Twelve hex digits of the table's rows, as read (not of its path)."""
        return hashlib.sha256(json.dumps(self.rows, sort_keys=True).encode()).hexdigest()[:12]

    def describe(self) -> str:
        return f"table {self.path.name} ({len(self.rows)} architectures)"

    def check(self, space_spec: str, target: PredictTarget) -> None:
        stored = {}
        for key in ("device_name", "dtype", "batch_size", "mode"):  # every row's, not the first row's alone
            values = {row.get(key) for row in self.rows if row.get(key)}
            if len(values) > 1:
                raise NasutilError(f"prediction table {self.path.name} mixes configurations: {key} "
                                   f"{', '.join(sorted(values))}")
            if values and key != "device_name":
                stored[key] = values.pop()
        wanted = {"dtype": target.dtype, "batch_size": str(target.batch_size), "mode": target.mode}
        differ = [f"{k} {stored[k]} (asked: {wanted[k]})" for k in stored if stored[k] != wanted[k]]
        if differ:
            raise NasutilError(f"prediction table {self.path.name} was predicted at another configuration: "
                               f"{', '.join(differ)}")
        from nasutil.registry import get_space

        self._rows_for(space_spec, get_space(space_spec))  # a malformed row fails here, before any search starts

    def _rows_for(self, space_spec: str, space: SearchSpace) -> dict[str, dict[str, str]]:
        """The rows keyed by canonical arch string of the space, each checked once per space."""
        if space_spec not in self._by_space:
            keyed: dict[str, dict[str, str]] = {}
            lines: dict[str, int] = {}
            for number, row in enumerate(self.rows, start=2):
                try:
                    for column, kind in (("latency_ms", float), ("throughput_per_s", float), ("utilization", float),
                                         ("flops_per_image", int), ("params", int)):
                        value = _number(row.get(column), kind)
                        if value is not None and (value < 0 or (value == 0 and column in POSITIVE)):
                            raise ValueError(f"{column} {row.get(column)!r} is not a "
                                             f"{'positive' if column in POSITIVE else 'non-negative'} number")
                    arch = space.parse(row["arch"]).to_string()
                except (ValueError, OverflowError, NasutilError) as exc:
                    raise NasutilError(f"{self.path}:{number}: {exc}") from None
                if arch in keyed and keyed[arch] != row:  # which of two figures is the network's? (the last won)
                    raise NasutilError(f"{self.path}:{number}: {arch} is also on line {lines[arch]}, with other "
                                       f"figures")
                keyed[arch], lines[arch] = row, number
            self._by_space[space_spec] = keyed
        return self._by_space[space_spec]

    def _row(self, candidates: Candidates, arch: Arch) -> dict[str, str]:
        text = arch.to_string()
        row = self._rows_for(candidates.space_spec, candidates.space).get(text)
        if row is None:
            raise NasutilError(f"architecture {text} is not in the prediction table")
        return row

    def latencies_ms(self, candidates: Candidates, target: PredictTarget) -> list[float]:
        return [_number(self._row(candidates, arch)["latency_ms"], float) for arch in candidates.archs]

    def predict_many(self, space: str | SearchSpace, archs: Sequence[str | Arch], target: PredictTarget,
                     input_size: int | None = None) -> list[Prediction]:
        """The stored figures as they are (throughput and utilization are not derived again)."""
        candidates = self.candidates(space, archs, input_size)
        self.check(candidates.space_spec, target)
        out = []
        for arch in candidates.archs:
            row = self._row(candidates, arch)
            try:
                out.append(Prediction(
                    space=candidates.space_spec, arch=arch.to_string(), predictor=row.get("predictor") or "table",
                    device_name=row.get("device_name") or self._device_name, dtype=target.dtype, batch_size=target.batch_size,
                    mode=target.mode, flops_per_image=_number(row.get("flops_per_image"), int),
                    latency_ms=_number(row["latency_ms"], float), throughput_per_s=_number(row["throughput_per_s"], float),
                    utilization=_number(row["utilization"], float), params=_number(row.get("params"), int)))
            except ValueError as exc:  # rows are checked in `check`; this is for tables changed since
                raise NasutilError(f"{self.path}: row of {arch.to_string()}: {exc}") from None
        return out


def _number(text: str | None, kind: type):
    if text in (None, ""):
        return None
    value = kind(float(text)) if kind is int else kind(text)
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite number {text!r}")
    return value
