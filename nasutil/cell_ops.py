"""Cell ops: what a generated cell space (`cell`) puts on its edges, extensible by plugins.

An op says how to build it (a module taking and giving C channels at the cell's resolution; torch is
imported only by `build`), how to build its stride-2 form for a reduction cell (`reduce`; an op
without one cannot appear in a space with reduction cells), how to list it for the predictors
(`nasutil.ops.Op`s for one image, so a generated space predicts without building anything; without a
listing the space traces the built network instead), whether it has parameters, and whether its
output is all zeros (`none`): a cell with no path of non-zero ops from input to output is degenerate.

A package adds ops by naming `CellOp` values in its pyproject.toml::

    [project.entry-points."nasutil.cell_ops"]
    my_conv = "my_package.ops:MY_CONV"

or at run time with `register_cell_op`. The built-in ops register through the same group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from nasutil.errors import NasutilError
from nasutil.ops import Op

ENTRY_POINT_GROUP = "nasutil.cell_ops"


@dataclass(frozen=True)
class CellOp:
    name: str
    build: Callable[[int], Any]  # channels -> torch module, same channels and resolution out
    listing: Callable[[int, int], list[Op]] | None  # channels, resolution -> the ops one image launches
    has_params: bool = False
    zero: bool = False  # the output is all zeros
    reduce: Callable[[int], Any] | None = None  # channels -> the op at stride 2 (half the resolution)


_runtime: dict[str, CellOp] = {}
_loaded: dict[str, CellOp] | None = None


def register_cell_op(op: CellOp) -> CellOp:
    if not isinstance(op, CellOp):
        raise NasutilError(f"register_cell_op takes a CellOp, got {type(op).__name__}")
    _runtime[op.name] = op
    return op


def _entry_point_ops() -> dict[str, CellOp]:
    global _loaded
    if _loaded is None:
        found: dict[str, CellOp] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                op = ep.load()
            except Exception as exc:  # a broken plugin is named, not a traceback
                raise NasutilError(f"cell op {ep.name!r} could not be imported ({ep.value}): {exc}") from None
            if not isinstance(op, CellOp) or op.name != ep.name:
                raise NasutilError(f"entry point {ep.name!r} ({ep.value}) must name a CellOp called {ep.name!r}")
            found[ep.name] = op
        _loaded = found
    return _loaded


def cell_op_names() -> list[str]:
    return sorted({**_entry_point_ops(), **_runtime})


def cell_op(name: str) -> CellOp:
    ops = {**_entry_point_ops(), **_runtime}
    if name not in ops:
        raise NasutilError(f"unknown cell op {name!r} (known: {', '.join(sorted(ops))})")
    return ops[name]
