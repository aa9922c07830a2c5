"""Cell ops: what a generated cell space (`cell`) puts on its edges, extensible by plugins.

An op says how to build it (a module taking and giving C channels at the cell's resolution; torch is
imported only by `build`), how to build its stride-2 form for a reduction cell (`reduce`; an op
without one cannot appear in a space with reduction cells), how to list it for the predictors
(`nasutil.ops.Op`s for one image, so a generated space predicts without building anything; without a
listing the space traces the built network instead), whether it has parameters, and whether its
output is all zeros (`none`): a cell with no path of non-zero ops from input to output is degenerate.
A space's size is bounded before anything is built: an op that is not built in is built (and its stride-2
form) once per width the space needs on PyTorch's meta device, which holds shapes but no memory, and its
parameters and module outputs counted there, so its build and forward must work on that device.

A package adds ops by naming `CellOp` values in its pyproject.toml::

    [project.entry-points."nasutil.cell_ops"]
    my_conv = "my_package.ops:MY_CONV"

or at run time with `register_cell_op` (an op so registered reaches the evaluator's worker processes
where the module of its build function binds it to a name). The built-in ops register through the same
group; a broken plugin behaves as every kind's does (`nasutil.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nasutil.ops import Op
from nasutil.plugins import Registry, global_path

ENTRY_POINT_GROUP = "nasutil.cell_ops"


@dataclass(frozen=True)
class CellOp:
    name: str
    build: Callable[[int], Any]  # channels -> torch module, same channels and resolution out
    listing: Callable[[int, int], list[Op]] | None  # channels, resolution -> the ops one image launches
    has_params: bool = False
    zero: bool = False  # the output is all zeros
    reduce: Callable[[int], Any] | None = None  # channels -> the op at stride 2 (half the resolution)


def _accept(value: object, name: str) -> CellOp:
    if not isinstance(value, CellOp):
        raise TypeError(f"it is a {type(value).__name__}, not a CellOp")
    if value.name != name:
        raise TypeError(f"it is a CellOp called {value.name!r}, not {name!r}")
    return value


def _path(op: CellOp) -> str | None:
    """Where a worker finds a run-time op again: a global bound to it in the module of its build function
    (or of its listing or stride-2 form)."""
    return global_path(op, (getattr(f, "__module__", None) for f in (op.build, op.listing, op.reduce)))


OPS: Registry[CellOp] = Registry(ENTRY_POINT_GROUP, "cell op", _accept, owner=__name__, path_of=_path)


def register_cell_op(op: CellOp) -> CellOp:
    return OPS.register(getattr(op, "name", repr(op)), op)


def cell_op_names() -> list[str]:
    return sorted(OPS.names())


def cell_op(name: str) -> CellOp:
    return OPS.get(name)
