"""Move a network to the device in one copy per dtype, not one per tensor.

`Module.to` copies each parameter and buffer by itself: a few hundred small copies for a NAS-Bench-201
cell network, each of which hands the interpreter's lock back and waits to take it again. Alone that costs
about 13 ms; in a population, where a driver thread and the members' threads all want the interpreter, a
candidate's move took 0.4-0.7 s of its host turn on an H100. Packed into one flat buffer per dtype on the
host, the move is one copy and one call that cuts the buffer back into views, whatever the network's size:
52-189 ms in the same population (BENCHMARKS.md, "Seeds 99 and 100 on an H100", where the search as a
whole ran no faster: the device set its pace).

The values, shapes, memory formats, parameter objects and their `requires_grad` are those `Module.to`
gives (`tests/test_colocate_transfer.py`); only where each tensor's storage lies differs (slices of one
buffer). One parameter in two modules is moved once; a network where two tensors share storage (a buffer
that views a weight), or that holds anything but plain dense tensors, is moved by `Module.to` instead.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


def move_to_device(model: nn.Module, device: torch.device, channels_last: bool = False,
                   packed: bool | None = None) -> nn.Module:
    """`model` on `device` (its own tensors moved in place, as `Module.to` does), 4-D tensors in channels-last
    memory format where `channels_last` (as `model.to(memory_format=torch.channels_last)` makes them).
    `packed`: None packs where the copy goes to another device; True packs wherever it can (onto the host,
    the same steps but the copy itself), False never."""
    tensors = _own_tensors(model) if packed or (packed is None and device.type != "cpu") else None
    if tensors is None:
        model = model.to(device)
        return model.to(memory_format=torch.channels_last) if channels_last else model
    groups: dict[torch.dtype, list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault(t.dtype, []).append(t)
    with torch.no_grad():
        for group in groups.values():
            _move_group(group, device, channels_last)
    return model


def _own_tensors(model: nn.Module) -> list[torch.Tensor] | None:
    """The parameters and buffers, each once; None where packing could change what the network computes or
    shares (two names for one storage, a sparse or quantized tensor, a subclass, a gradient), or where they do
    not all lie on the host."""
    tensors = [*model.parameters(), *model.buffers()]
    if not tensors:
        return None
    storages = {t.untyped_storage().data_ptr() for t in tensors if t.numel()}
    if len(storages) != sum(1 for t in tensors if t.numel()):
        return None
    if any(t.device.type != "cpu" for t in tensors) or any(p.grad is not None for p in model.parameters()):
        return None
    if any(t.layout != torch.strided or t.is_quantized or type(t) not in (torch.Tensor, nn.Parameter)
           for t in tensors):
        return None
    return tensors


def _move_group(group: list[torch.Tensor], device: torch.device, channels_last: bool) -> None:
    """One dtype's tensors: laid out on the host as they will lie on the device (channels-last 4-D tensors
    as their NHWC order), copied at once, then each tensor given its view of the copy."""
    laid_out = [_in_memory_order(t) if channels_last and t.dim() == 4 else t for t in group]
    flat = _flatten_dense_tensors(laid_out).to(device)
    for t, piece in zip(group, _unflatten_dense_tensors(flat, laid_out)):
        t.data = piece.permute(0, 3, 1, 2) if channels_last and t.dim() == 4 else piece


def _in_memory_order(t: torch.Tensor) -> torch.Tensor:
    """A 4-D NCHW tensor as the NHWC array that channels-last format stores (a copy on the host)."""
    return t.detach().permute(0, 2, 3, 1).contiguous()
