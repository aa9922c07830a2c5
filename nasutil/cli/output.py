"""Shared output helpers for CLI commands: JSON lines and rich tables."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console


def console() -> Console:
    """A console that keeps wide tables readable when output is piped to a file."""
    out = Console(soft_wrap=False, highlight=False)
    if not out.is_terminal:
        out = Console(soft_wrap=False, highlight=False, width=160)
    return out


def print_json(obj: Any, stream=None) -> None:
    """One JSON document on one line (NaN written as null), flushed: a reader of a pipe sees each row as it
    comes, and a process killed later keeps the rows already written."""
    stream = stream or sys.stdout
    stream.write(json.dumps(obj, allow_nan=False, default=_default) + "\n")
    stream.flush()


def _default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"cannot serialise {type(value).__name__}")


def human_count(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"
