"""Weights made on the measured device: a network built without storage gets its tensors there.

Timing a network depends on its tensors' shapes, strides, dtypes and devices, not on their values. Built on
the host, a NAS-Bench-201 cell network moves its ~400 parameters and buffers to the GPU one synchronous copy
at a time (5.8-7.2 ms a cell on H100s, a quarter of a fast measurement's turn on the device: BENCHMARKS.md,
"The whole NAS-Bench-201 space in one pass"). Built on PyTorch's meta device instead (shapes and strides, no
storage), the network is given one block of device memory per dtype, cut into views with the strides the meta
tensors have, and filled there by a handful of kernels: convolution and linear weights and biases from
PyTorch's default uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), grouped by fan-in; normalization weights and
running variances 1, their biases and running means 0; anything else 0. So the network computes with values of
the scale a freshly built one has, and each tensor's shape, strides and dtype are the built network's; only
their storage differs (slices of one block, as `nasutil.colocate.transfer` lays them out).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable, Iterator

import torch
import torch.nn as nn

#: every view starts on a multiple of this many bytes, as the caching allocator's blocks do
ALIGN_BYTES = 512
#: the caching allocator serves blocks up to this size from its small pool, larger ones from its large pool
SMALL_BLOCK_BYTES = 1 << 20
NORM_LAYERS = (nn.modules.batchnorm._NormBase, nn.GroupNorm, nn.LayerNorm)


@contextlib.contextmanager
def without_storage() -> Iterator[None]:
    """Modules and tensors made inside are on the meta device: shapes, dtypes and strides, no memory."""
    with torch.device("meta"):
        yield


def built_without_storage(model: nn.Module) -> bool:
    """Whether any of `model`'s parameters or buffers lies on the meta device."""
    return any(t.is_meta for t in _tensors(model))


@dataclass
class _Region:
    """Consecutive views in one dtype's block that one fill covers: ("uniform", bound), ("ones",) or ("zeros",)."""
    fill: tuple
    start: int = 0
    end: int = 0


@dataclass
class _Plan:
    """Where each tensor lies in its dtype's block (element offsets), and the fills, worked out on the host."""
    sizes: dict[torch.dtype, int] = field(default_factory=dict)
    places: dict[int, tuple[torch.dtype, int]] = field(default_factory=dict)  # id(tensor) -> (dtype, offset)
    regions: dict[torch.dtype, list[_Region]] = field(default_factory=dict)


def allocate(model: nn.Module, device: torch.device | str, *, in_turn: bool | None = None) -> Callable[[], None]:
    """Give `model`'s storage-less tensors views of fresh memory on `device`, in the strides and dtype each
    has, and return the fill that gives them values (as the module docstring says).

    The two halves are split for the device turn: allocating is host work (the caching allocator's books and
    views cut from one block per dtype, no kernel), so it runs while another worker times; the fill launches
    one kernel per region (a fan-in, the ones, the zeros) and belongs inside the turn. That holds only while
    the allocator serves the blocks from memory it already holds: memory it must get from the driver would be
    mapped while another worker times. So where the cache cannot serve them (`in_turn=None`, the default) or
    `in_turn` is true, the allocation and the views wait for the fill, inside the turn, as `Module.to`'s copies
    do. (That was not why workers' first cells read slow: the evaluator copies those, `measure_model`.) Tensors
    that already hold storage are copied to `device` with the views, as `Module.to` would."""
    device = torch.device(device)
    plan = _plan(model)
    if in_turn is None:
        in_turn = not _cache_serves(plan.sizes, device)
    blocks: dict[torch.dtype, torch.Tensor] = {}

    def give_memory() -> None:
        blocks.update({dtype: torch.empty(size, dtype=dtype, device=device) for dtype, size in plan.sizes.items()})

        def place(t: torch.Tensor) -> torch.Tensor:
            where = plan.places.get(id(t))
            if where is None:
                return t.to(device)
            dtype, offset = where
            return blocks[dtype].as_strided(t.shape, t.stride(), offset)

        model._apply(place)

    if not in_turn:
        give_memory()

    def fill() -> None:
        if in_turn:
            give_memory()
        with torch.no_grad():
            for dtype, regions in plan.regions.items():
                for region in regions:
                    piece = blocks[dtype][region.start:region.end]
                    if region.fill[0] == "uniform":
                        piece.uniform_(-region.fill[1], region.fill[1])
                    elif region.fill[0] == "ones":
                        piece.fill_(1)
                    else:
                        piece.zero_()

    return fill


def materialize(model: nn.Module, device: torch.device | str) -> nn.Module:
    """`model`, built without storage, on `device` with its values filled: `allocate` and its fill at once."""
    allocate(model, device)()
    return model


def _cache_serves(sizes: dict[torch.dtype, int], device: torch.device) -> bool:
    """Whether the caching allocator holds enough free memory, in the pools it would take them from, for one
    block of each size: then no memory is mapped from the driver. Off CUDA there is nothing to map."""
    if device.type != "cuda":
        return True
    stats = torch.cuda.memory_stats(device)

    def free(pool: str) -> int:
        return stats.get(f"reserved_bytes.{pool}.current", 0) - stats.get(f"allocated_bytes.{pool}.current", 0)

    wanted = [_round_up(size * _itemsize(dtype), ALIGN_BYTES) for dtype, size in sizes.items()]
    large = sum(b for b in wanted if b > SMALL_BLOCK_BYTES)
    small = sum(b for b in wanted if b <= SMALL_BLOCK_BYTES)
    return large <= free("large_pool") and small <= free("small_pool")


def _plan(model: nn.Module) -> _Plan:
    """Group the meta tensors by dtype and fill, each fill's tensors side by side, each view aligned."""
    wanted: dict[torch.dtype, dict[tuple, list[torch.Tensor]]] = {}
    seen: set[int] = set()
    for module in model.modules():
        for name, t in [*module._parameters.items(), *module._buffers.items()]:
            if t is None or not t.is_meta or id(t) in seen:
                continue
            seen.add(id(t))
            wanted.setdefault(t.dtype, {}).setdefault(_fill(module, name, t), []).append(t)
    plan = _Plan()
    for dtype, fills in wanted.items():
        align = max(1, ALIGN_BYTES // _itemsize(dtype))
        offset = 0
        regions = []
        for fill, tensors in fills.items():
            region = _Region(fill, start=offset)
            for t in tensors:
                plan.places[id(t)] = (dtype, offset)
                offset = _round_up(offset + _extent(t), align)
            region.end = offset
            regions.append(region)
        plan.sizes[dtype] = max(offset, 1)
        plan.regions[dtype] = regions
    return plan


def _fill(module: nn.Module, name: str, t: torch.Tensor) -> tuple:
    """How a tensor is filled: PyTorch's default initialisation where it is known, else zeros."""
    if not t.is_floating_point():
        return ("zeros",)
    if isinstance(module, NORM_LAYERS):
        return ("ones",) if name in ("weight", "running_var") else ("zeros",)
    if name in module._parameters and hasattr(module, "weight") and isinstance(module.weight, torch.Tensor) \
            and module.weight.dim() >= 2:
        fan_in = module.weight.shape[1] * math.prod(module.weight.shape[2:])
        return ("uniform", 1.0 / math.sqrt(max(fan_in, 1)))
    return ("zeros",)


def _tensors(model: nn.Module) -> Iterator[torch.Tensor]:
    yield from model.parameters()
    yield from model.buffers()


def _extent(t: torch.Tensor) -> int:
    """Elements a view with `t`'s shape and strides spans from its first element."""
    if t.numel() == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype, device="meta").element_size()


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple

