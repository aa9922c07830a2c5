"""A device profile is an untrusted file: every number it holds is checked (type, range, finite), every
key is known and nothing is given twice before the profile is used, and a bad one is named in one line."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

import numpy as np

from nasutil.errors import NasutilError

#: hyper-parameters a learned model may carry: (integer?, lowest, highest)
LEARNED_PARAMS: dict[str, tuple[bool, float, float]] = {
    "max_iter": (True, 1, 2000),
    "learning_rate": (False, 1e-4, 1.0),
    "max_leaf_nodes": (True, 2, 1024),
    "min_samples_leaf": (True, 1, 100_000),
    "l2_regularization": (False, 0.0, 1e6),
    "random_state": (True, 0, 2**31 - 1),
}
#: the most training rows and features a learned model may carry
MAX_ROWS, MAX_FEATURES = 1_000_000, 4096
#: the largest profile file read
MAX_PROFILE_BYTES = 256 * 1024 * 1024
#: the latencies (ms) and batch sizes a profile may hold: a measurement outside them cannot be fitted into
#: one that loads
LATENCY_MS_RANGE = (1e-9, 1e9)
BATCH_SIZE_RANGE = (1, 2**20)
#: the longest driver or torch version a profile holds (NVIDIA's "580.159.04", torch's "2.11.0+cu130"), and
#: the longest date it was created on ("2026-11-30")
MAX_VERSION_CHARS = 100
#: the longest name a profile holds (a device's, a space's, an op family's): NVML's names are under 96
#: characters, a cell space's is its file's path
MAX_NAME_CHARS = 1000
#: the longest note of where a profile comes from (the builds and fits it went through, the files they read):
#: a longer one is cut in the middle when written (`clipped`)
MAX_SOURCE_CHARS = 10_000


K = TypeVar("K", bound=Hashable)


class BadProfile(NasutilError):
    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"malformed device profile: {where} {what}")


def number(value: Any, where: str, low: float, high: float, integer: bool = False) -> float:
    """A finite number in [low, high] (a whole one where `integer`), or BadProfile naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadProfile(where, f"must be a number, got {value!r}")
    if not math.isfinite(value) or not low <= value <= high or (integer and value != int(value)):
        kind = "a whole number" if integer else "a finite number"
        raise BadProfile(where, f"must be {kind} in [{low:g}, {high:g}], got {value!r}")
    return int(value) if integer else float(value)


def text(value: Any, where: str, choices: tuple[str, ...] | None = None, max_chars: int = MAX_NAME_CHARS) -> str:
    """Text (one of `choices`, where given) of at most `max_chars` characters: a number, list or object where
    text belongs (a profile's `created` or `source`) was once turned into text without a word, and text of any
    length was kept."""
    if not isinstance(value, str) or (choices is not None and value not in choices):
        expected = f"one of {', '.join(choices)}" if choices else "text"
        raise BadProfile(where, f"must be {expected}, got {_shown(value)}")
    if len(value) > max_chars:
        raise BadProfile(where, f"must be text of at most {max_chars:,} characters, got {len(value):,} of them")
    return value


def version(value: Any, where: str) -> str | None:
    """A driver or torch version: text of at most MAX_VERSION_CHARS, or None where the profile does not know it
    (a profile built without NVML). Any JSON value loaded, a list or a megabyte of text shown as a version."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_VERSION_CHARS:
        raise BadProfile(where, f"must be null or text of at most {MAX_VERSION_CHARS} characters, got {_shown(value)}")
    return value


def clipped(note: str, max_chars: int = MAX_SOURCE_CHARS) -> str:
    """A note (a profile's `source`) within `max_chars`, its middle cut where longer: each refit onto its own
    base adds to it, and a profile whose note grew past the bound would not load again."""
    if len(note) <= max_chars:
        return note
    half = (max_chars - 5) // 2
    return f"{note[:half]} ... {note[-half:]}"


def _shown(value: Any) -> str:
    """A value as an error quotes it: at most 60 characters of its repr."""
    shown = repr(value)
    return shown if len(shown) <= 60 else f"{shown[:57]}..."


def only_keys(data: Any, known: set[str] | tuple[str, ...], where: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise BadProfile(where, f"must be an object, got {type(data).__name__}")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise BadProfile(where, f"has unknown key {unknown[0]!r} (known: {', '.join(sorted(known))})")
    return data


def mapping(data: Any, where: str) -> Mapping[str, Any]:
    """An object with text keys (its keys are names the caller checks)."""
    if not isinstance(data, Mapping) or not all(isinstance(k, str) for k in data):
        raise BadProfile(where, "must be an object with text keys")
    return data


def unique(entries: Iterable[tuple[K, str]], what: str, label: Callable[[K], str], why: str) -> None:
    """Refuse an entry whose key an earlier one has, naming both (`entries`: (key, where) pairs): of two
    entries for one thing the readers kept one silently, and not always the same one."""
    first: dict[K, str] = {}
    for key, where in entries:
        if key in first:
            raise BadProfile(where, f"repeats the {what} of {first[key]} ({label(key)}): {why}")
        first[key] = where


def learned_params(params: Any, where: str) -> dict[str, Any]:
    only_keys(params or {}, set(LEARNED_PARAMS), where)
    return {k: number(v, f"{where}.{k}", LEARNED_PARAMS[k][1], LEARNED_PARAMS[k][2], LEARNED_PARAMS[k][0])
            for k, v in (params or {}).items()}


def matrix(rows: Any, where: str) -> np.ndarray:
    """A rectangular list of lists of finite numbers, within MAX_ROWS x MAX_FEATURES (checked with numpy:
    a profile holds millions of them)."""
    if not isinstance(rows, list) or not 10 <= len(rows) <= MAX_ROWS:
        raise BadProfile(where, f"must be a list of 10 to {MAX_ROWS:,} rows")
    try:
        array = np.asarray(rows)
    except ValueError:
        array = None  # ragged
    if array is None or array.ndim != 2 or not 1 <= array.shape[1] <= MAX_FEATURES:
        raise BadProfile(where, f"rows must be lists of one length, 1 to {MAX_FEATURES} numbers each")
    if array.dtype.kind not in "iuf":
        raise BadProfile(where, "must hold numbers only")
    array = array.astype(np.float64)
    bad = np.argwhere(~np.isfinite(array))
    if len(bad):
        raise BadProfile(f"{where}[{bad[0][0]}]", f"holds {array[tuple(bad[0])]!r}, not a finite number")
    return array


def positive_list(values: Any, where: str, length: int) -> list[float]:
    if not isinstance(values, list) or len(values) != length:
        raise BadProfile(where, f"must be a list of {length} numbers")
    return [number(v, f"{where}[{i}]", *LATENCY_MS_RANGE) for i, v in enumerate(values)]
