"""Device profiles: what a predictor knows about one GPU, as plain versioned JSON.

A profile holds the device's identity (name, driver, torch version, date), optional
analytical-model constants per dtype and mode (from `analytical.calibrate`; defaults where
absent), operator tables (measured op latencies per dtype, batch and mode, with their
overlap constants), and learned latency models per space and configuration (stored as
their training rows, refitted on load). Loading one reads JSON and numbers only; it never
executes anything from the file. Version 1 files (no operator tables) still load.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import importlib.resources
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from nasutil.devices import DTYPES
from nasutil.errors import NasutilError
from nasutil.evaluator.config import MODES
from nasutil.files import parse_json, read_text, write_text_atomically
from nasutil.ops import Op
from nasutil.predictor import profile_checks as check
from nasutil.predictor.analytical import KernelModel
from nasutil.predictor.features import FEATURE_SETS
from nasutil.predictor.learned import LearnedLatencyModel
from nasutil.predictor.op_tables import OperatorTable, OpTableModel, Overlap, op_kind

PROFILE_FORMAT = "nasutil-device-profile"
PROFILE_VERSION = 2
READABLE_VERSIONS = (1, 2)
OP_FIELDS = ("family", "c_in", "h_in", "w_in", "c_out", "h_out", "w_out", "kernel", "stride", "groups", "bias",
             "variant", "dilation")
#: the fields of profiles written before ops carried a dilation (read as dilation 1)
OLD_OP_FIELDS = OP_FIELDS[:-1]


@dataclass
class LearnedEntry:
    space: str
    dtype: str
    batch_size: int
    mode: str
    features: str  # "encoding" or "encoding+operators"
    model: LearnedLatencyModel
    rows: int
    #: held-out MAPE of each predictor for this space and configuration, scored when the profile was fitted
    validation: dict[str, float] = field(default_factory=dict)

    def matches(self, space: str, dtype: str, batch_size: int, mode: str) -> bool:
        return (self.space, self.dtype, self.batch_size, self.mode) == (space, dtype, batch_size, mode)


@dataclass
class DeviceProfile:
    device_name: str
    driver_version: str | None = None
    torch_version: str | None = None
    created: str = field(default_factory=lambda: dt.date.today().isoformat())
    source: str = ""
    analytical: dict[str, KernelModel] = field(default_factory=dict)  # "dtype/mode" -> constants
    learned: list[LearnedEntry] = field(default_factory=list)
    operators: list[OperatorTable] = field(default_factory=list)

    def kernel_model(self, dtype: str, mode: str) -> KernelModel:
        return self.analytical.get(f"{dtype}/{mode}", KernelModel())

    @cached_property
    def op_model(self) -> OpTableModel | None:
        """The operator-level model over this profile's tables (one per profile: it memoises op times)."""
        return OpTableModel(self.operators) if self.operators else None

    def timed_op_kinds(self, dtype: str, batch_size: int, mode: str) -> set[str] | None:
        """The kinds of op (`op_kind`) the operator table at this configuration timed; None without a table."""
        key = f"{dtype}/{batch_size}/{mode}"
        if key not in self._op_kinds:
            table = next((t for t in self.operators if t.key == key), None)
            self._op_kinds[key] = None if table is None else {op_kind(op) for op in table.times_us}
        return self._op_kinds[key]

    @cached_property
    def _op_kinds(self) -> dict[str, set[str] | None]:
        return {}

    def learned_for(self, space: str, dtype: str, batch_size: int, mode: str) -> LearnedEntry | None:
        return next((e for e in self.learned if e.matches(space, dtype, batch_size, mode)), None)

    def to_dict(self) -> dict:
        return {
            "format": PROFILE_FORMAT, "version": PROFILE_VERSION, "device_name": self.device_name,
            "driver_version": self.driver_version, "torch_version": self.torch_version, "created": self.created,
            "source": self.source, "analytical": {k: v.to_dict() for k, v in self.analytical.items()},
            "operators": [_table_to_dict(t) for t in self.operators],
            "learned": [{"space": e.space, "dtype": e.dtype, "batch_size": e.batch_size, "mode": e.mode,
                         "features": e.features, "rows": e.rows, "validation": e.validation,
                         "model": e.model.to_dict()} for e in self.learned],
        }

    @cached_property
    def digest(self) -> str:
        """Twelve hex digits of the profile's content (its canonical JSON): a study is tied to what predicted its
        figures, so one refitted in place under the same name or path is told apart, and a shipped profile
        named by its name or by its file's path is one profile."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def save(self, path: str | Path) -> None:
        """Write the profile, only if it loads again, and in one step: `profile fit --base P --out P` rewrites
        the user's own profile, which a failed or unreadable write must leave as it was."""
        text = json.dumps(self.to_dict(), separators=(",", ":"))
        try:
            DeviceProfile.from_dict(json.loads(text))
        except NasutilError as exc:
            raise NasutilError(f"not writing {str(path)!r}: the profile would not load again ({exc})") from None
        write_text_atomically(Path(path), text)

    @classmethod
    def from_dict(cls, data: dict) -> DeviceProfile:
        if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
            raise NasutilError("not a nasutil device profile")
        if data.get("version") not in READABLE_VERSIONS:
            raise NasutilError(f"unsupported profile version {data.get('version')!r} (this nasutil reads "
                               f"version {PROFILE_VERSION})")
        check.only_keys(data, {"format", "version", "device_name", "driver_version", "torch_version", "created",
                               "source", "analytical", "operators", "learned"}, "profile")
        try:
            learned = [_learned_from_dict(e, f"learned[{i}]") for i, e in enumerate(_list(data, "learned"))]
            analytical = {k: KernelModel.from_dict(v, f"analytical.{k}")
                          for k, v in check.mapping(data.get("analytical", {}), "analytical").items()}
            operators = [_table_from_dict(t, f"operators[{i}]") for i, t in enumerate(_list(data, "operators"))]
            check.unique(((t.key, f"operators[{i}]") for i, t in enumerate(operators)), "configuration", str,
                         "a profile holds one operator table for each")
            check.unique((((e.space, e.dtype, e.batch_size, e.mode), f"learned[{i}]") for i, e in enumerate(learned)),
                         "space and configuration", _configuration_label,
                         "a profile holds one learned model for each")
            device_name = check.text(data.get("device_name"), "device_name")
            if not device_name.strip():
                raise check.BadProfile("device_name", "must name the device, got an empty name")
            return cls(device_name=device_name,
                       driver_version=check.version(data.get("driver_version"), "driver_version"),
                       torch_version=check.version(data.get("torch_version"), "torch_version"),
                       created=check.text(data.get("created", ""), "created", max_chars=check.MAX_VERSION_CHARS),
                       source=check.text(data.get("source", ""), "source", max_chars=check.MAX_SOURCE_CHARS),
                       analytical=analytical, learned=learned, operators=operators)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise NasutilError(f"malformed device profile: {exc}") from None


def merge_operator_tables(profiles: list[DeviceProfile]) -> DeviceProfile:
    """One profile holding every table of `profiles` (all of one device), so that a new space's ops, timed
    by their own `profile build`, join the tables already there. At a configuration more than one profile
    timed, the ops are pooled; an op timed twice keeps the first profile's time, so that what the first
    already predicts does not move with another day's timings. The overlap constants are the first
    profile's: refit them (`fit_profile(base=...)`) on measured networks of every space."""
    if not profiles:
        raise NasutilError("no profiles to merge")
    devices = {p.device_name for p in profiles}
    if len(devices) != 1:
        raise NasutilError(f"profiles of different devices cannot be merged: {', '.join(sorted(devices))}")
    merged = copy.deepcopy(profiles[0])
    tables = {t.key: t for t in merged.operators}
    for other in profiles[1:]:
        for table in other.operators:
            if table.key in tables:
                kept = tables[table.key].times_us
                kept.update({op: us for op, us in table.times_us.items() if op not in kept})
            else:
                tables[table.key] = copy.deepcopy(table)
                merged.operators.append(tables[table.key])
    merged.source = check.clipped("; ".join(p.source for p in profiles if p.source))
    merged.__dict__.pop("op_model", None)
    merged.__dict__.pop("_op_kinds", None)
    return merged


def _table_to_dict(table: OperatorTable) -> dict:
    return {"dtype": table.dtype, "batch_size": table.batch_size, "mode": table.mode, **asdict(table.shared),
            "by_space": {name: asdict(o) for name, o in table.by_space.items()},
            "fields": [*OP_FIELDS, "us"],
            "ops": [[getattr(op, f) for f in OP_FIELDS] + [round(us, 4)] for op, us in table.times_us.items()]}


def _list(data: dict, key: str) -> list:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise check.BadProfile(key, f"must be a list, got {type(value).__name__}")
    return value


def _learned_from_dict(e: Any, where: str) -> LearnedEntry:
    check.only_keys(e, {"space", "dtype", "batch_size", "mode", "features", "rows", "validation", "model"}, where)
    validation = check.mapping(e.get("validation", {}), f"{where}.validation")
    return LearnedEntry(check.text(e.get("space"), f"{where}.space"), check.text(e.get("dtype"), f"{where}.dtype", DTYPES),
                        check.number(e.get("batch_size"), f"{where}.batch_size", *check.BATCH_SIZE_RANGE,
                                     integer=True),
                        check.text(e.get("mode"), f"{where}.mode", MODES), check.text(e.get("features"),
                                                                                       f"{where}.features",
                                                                                       FEATURE_SETS),
                        LearnedLatencyModel.from_dict(e.get("model"), f"{where}.model"),
                        check.number(e.get("rows"), f"{where}.rows", 0, check.MAX_ROWS, integer=True),
                        {str(k): check.number(v, f"{where}.validation.{k}", 0, 1e6) for k, v in validation.items()})


def _table_from_dict(data: Any, where: str = "operators") -> OperatorTable:
    check.only_keys(data, {"dtype", "batch_size", "mode", "scale", "per_op_us", "offset_us", "calibrated_on",
                           "by_space", "fields", "ops"}, where)
    fields_ = data.get("fields")
    if not isinstance(fields_, list) or list(fields_) not in ([*OP_FIELDS, "us"], [*OLD_OP_FIELDS, "us"]):
        raise check.BadProfile(f"{where}.fields", f"must be {[*OP_FIELDS, 'us']}")
    names = fields_[:-1]
    ops = data.get("ops")
    if not isinstance(ops, list) or len(ops) > check.MAX_ROWS:
        raise check.BadProfile(f"{where}.ops", f"must be a list of at most {check.MAX_ROWS:,} operators")
    timed: list[tuple[Op, float]] = []
    for i, row in enumerate(ops):
        if not isinstance(row, list) or len(row) != len(names) + 1:
            raise check.BadProfile(f"{where}.ops[{i}]", f"must be a list of {len(names) + 1} values")
        us = check.number(row[-1], f"{where}.ops[{i}] time", 1e-6, 1e9)
        timed.append((_op_row(dict(zip(names, row[:-1])), f"{where}.ops[{i}]"), us))
    check.unique(((op, f"{where}.ops[{i}]") for i, (op, _) in enumerate(timed)), "op", _op_label,
                 "a table times each op once")
    times = dict(timed)
    by_space = check.mapping(data.get("by_space", {}), f"{where}.by_space")
    return OperatorTable(check.text(data.get("dtype"), f"{where}.dtype", DTYPES),
                         check.number(data.get("batch_size"), f"{where}.batch_size", *check.BATCH_SIZE_RANGE,
                                      integer=True),
                         check.text(data.get("mode"), f"{where}.mode", MODES), times, _overlap(data, where),
                         {str(k): _overlap(v, f"{where}.by_space.{k}") for k, v in by_space.items()})


#: the range of each whole-number field of an operator row: wide enough for any network a space builds,
#: narrow enough that no value can overflow the predictor's arithmetic or read as a plausible other op
OP_FIELD_RANGES = {"c_in": (1, 2**20), "h_in": (1, 2**16), "w_in": (1, 2**16), "c_out": (1, 2**20),
                   "h_out": (1, 2**16), "w_out": (1, 2**16), "kernel": (1, 1024), "stride": (1, 1024),
                   "groups": (1, 2**20), "dilation": (1, 1024)}


def _op_row(row: dict[str, Any], where: str) -> Op:
    """An operator row of a profile, every field checked: a dilation of 0 or a negative kernel would
    otherwise change predictions silently, and an infinite or huge one would crash them."""
    fields = {"family": check.text(row.get("family"), f"{where}.family"),
              "variant": check.text(row.get("variant", ""), f"{where}.variant")}
    for name, (low, high) in OP_FIELD_RANGES.items():
        if name in row or name != "dilation":
            fields[name] = check.number(row.get(name), f"{where}.{name}", low, high, integer=True)
    bias = row.get("bias", False)
    if not isinstance(bias, bool):
        raise check.BadProfile(f"{where}.bias", f"must be true or false, got {bias!r}")
    if fields["groups"] > min(fields["c_in"], fields["c_out"]):
        raise check.BadProfile(f"{where}.groups", f"must be at most the op's channels, got {fields['groups']}")
    return Op.from_dict({**fields, "bias": bias})


def _op_label(op: Op) -> str:
    """An op in a few words: its kind and shapes (a repeated one is the same in every field)."""
    return (f"{op_kind(op)}, {op.c_in}x{op.h_in}x{op.w_in} -> {op.c_out}x{op.h_out}x{op.w_out}"
            + (f", groups {op.groups}" if op.groups != 1 else "") + (", bias" if op.bias else ""))


def _configuration_label(key: tuple[str, str, int, str]) -> str:
    space, dtype, batch_size, mode = key
    return f"{space} {dtype} batch {batch_size} {mode}"


def _overlap(data: Any, where: str) -> Overlap:
    data = check.mapping(data, where)
    return Overlap(check.number(data.get("scale", 1.0), f"{where}.scale", 1e-3, 1e3),
                   check.number(data.get("per_op_us", 0.0), f"{where}.per_op_us", -1e6, 1e6),
                   check.number(data.get("offset_us", 0.0), f"{where}.offset_us", -1e9, 1e9),
                   check.number(data.get("calibrated_on", 0), f"{where}.calibrated_on", 0, 10**9, integer=True))


def builtin_profiles() -> list[str]:
    folder = importlib.resources.files("nasutil.data").joinpath("profiles")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".json")) if folder.is_dir() else []


def load_profile(name_or_path: str) -> DeviceProfile:
    """A shipped profile by name (e.g. `h200`) or a profile JSON file by path."""
    path = Path(name_or_path)
    if path.suffix == ".json" or path.exists():
        text = read_text(path, "profile", check.MAX_PROFILE_BYTES)
    else:
        resource = importlib.resources.files("nasutil.data").joinpath("profiles", f"{name_or_path}.json")
        if not resource.is_file():
            known = ", ".join(builtin_profiles()) or "none"
            raise NasutilError(f"unknown profile {name_or_path!r} (shipped: {known}; or give a .json path)")
        text = resource.read_text()
    return DeviceProfile.from_dict(parse_json(text, f"profile {name_or_path!r}"))
