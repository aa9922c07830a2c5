"""What a cell op that is not built in really holds and outputs, for the size bounds of a cell space.

The built-in ops' sizes are formulas (`cell_arch.edge_params_bound`, `cell_arch.OP_MAPS`); a plugin's op
may be anything, an 11x11 convolution with a wide hidden layer as well as a pooling, so it is built once
at each width and stride a space needs on PyTorch's meta device (shapes without memory) and counted: its
parameters, and in a forward pass of one image every module's output. Torch is imported only here, and
only for a space with such an op.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from nasutil.cell_ops import CellOp, cell_op
from nasutil.errors import NasutilError


@dataclass(frozen=True)
class OpMaps:
    """One edge's forward pass of one image: the values of all its modules' outputs, and of the largest."""

    values: int
    widest: int


def is_builtin(name: str) -> bool:
    """Whether `name` is one of nasutil's own ops (an op registered under its name in its place is not)."""
    registered = cell_op(name)
    return any(op is registered for op in _builtin_ops())


@functools.cache
def _builtin_ops() -> tuple[CellOp, ...]:
    from nasutil_search_spaces import cell_ops as builtin

    return tuple(op for op in vars(builtin).values() if isinstance(op, CellOp))


def op_params(name: str, width: int, stride: int) -> int:
    """The parameters of op `name` built at `width` channels and `stride`."""
    return _params(cell_op(name), width, stride)


def op_maps(name: str, width: int, stride: int, size: int) -> OpMaps:
    """The feature maps op `name` at `width` and `stride` outputs for one `size`x`size` image."""
    return _maps(cell_op(name), width, stride, size)


@functools.lru_cache(maxsize=256)
def _module(op: CellOp, width: int, stride: int) -> Any:
    """The op built on the meta device, once per width and stride; a one-line error where it cannot be."""
    import torch

    try:
        with torch.device("meta"):
            return (op.build(width) if stride == 1 else op.reduce(width)).eval()
    except Exception as exc:  # noqa: BLE001 - a plugin's code: whatever it raises, the op is named
        raise NasutilError(_unsized(op.name, "built", exc)) from None


@functools.lru_cache(maxsize=256)
def _params(op: CellOp, width: int, stride: int) -> int:
    from nasutil.counting import count_params  # torch comes with it: only for a space with such an op

    return count_params(_module(op, width, stride))


@functools.lru_cache(maxsize=1024)
def _maps(op: CellOp, width: int, stride: int, size: int) -> OpMaps:
    """Every module's output counted by a forward hook, the op's own included: a container's output is
    counted again with its last child's, which only overstates."""
    import torch

    module = _module(op, width, stride)
    sizes: list[int] = []

    def note(_module: Any, _args: Any, out: Any) -> None:
        sizes.extend(t.numel() for t in (out if isinstance(out, (tuple, list)) else (out,))
                     if isinstance(t, torch.Tensor))

    hooks = [m.register_forward_hook(note) for m in module.modules()]
    try:
        with torch.no_grad():
            module(torch.zeros(1, width, size, size, device="meta"))
    except Exception as exc:  # noqa: BLE001 - a plugin's code: whatever it raises, the op is named
        raise NasutilError(_unsized(op.name, f"run on a {size}x{size} input", exc)) from None
    finally:
        for hook in hooks:
            hook.remove()
    return OpMaps(sum(sizes), max(sizes, default=0))


def _unsized(name: str, what: str, exc: Exception) -> str:
    detail = (str(exc).splitlines() or [""])[0][:200]
    return (f"cell op {name!r} could not be sized: it must be {what} on PyTorch's meta device, without "
            f"memory, to bound a space's networks ({type(exc).__name__}: {detail})")
