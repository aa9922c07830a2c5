"""Low-precision copies of a network's weights, cast in one launch a step instead of one a weight.

Under autocast, every convolution and linear layer casts its fp32 weight to bf16 as it runs (one kernel a
weight), and autograd casts each weight's bf16 gradient back to fp32 on the way out (another): 99 of the 820
kernels of an average NAS-Bench-201 training step at batch 64 on an H100 (BENCHMARKS.md, "Kernels a training
step launches"), each tiny, and each a node of the step's CUDA graph for the device to run.

`WeightCopies` gives each weight that autocast would cast a bf16 copy, and the layers read the copy while a
step computes (`swapped`). The copies are refreshed from the fp32 weights by one multi-tensor copy before the
forward (`refresh`), and their gradients widened into fp32 by another after the backward (`gradients`); the
update then runs on the fp32 weights as before. Autocast leaves a tensor that is already of its dtype alone,
so the arithmetic is unchanged value for value: the same rounding of the same weights, the same bf16
gradient widened to fp32 (`tests/test_weight_copies.py`). On 16 NAS-Bench-201 cells on an H100: 11% fewer
kernels a step at batch 64, graphs 1.05x as fast alone and 1.03x together (BENCHMARKS.md, "One cast launch a
step instead of two a weight").

Only the parameters of plain `Conv*d`, `ConvTranspose*d` and `Linear` layers get a copy, and only where
every place that holds the parameter is such a layer: a subclass may compute on its weight in fp32 before
the convolution (weight standardisation), and a weight shared with another kind of layer must stay fp32
there. Everything else is cast by autocast as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn as nn

#: the layer types whose weights autocast casts as a whole (its lower-precision list: conv*, linear)
CAST_LAYERS: tuple[type[nn.Module], ...] = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d,
                                            nn.ConvTranspose2d, nn.ConvTranspose3d, nn.Linear)


class WeightCopies:
    """bf16 (or `dtype`) copies of `model`'s cast-layer weights, for a training step under autocast."""

    def __init__(self, model: nn.Module, dtype: torch.dtype) -> None:
        # every place that holds each parameter: a layer reached by two paths holds it once
        places: dict[int, list[tuple[nn.Module, str]]] = {}
        cast_only: dict[int, bool] = {}
        masters: dict[int, nn.Parameter] = {}
        seen: set[tuple[int, str]] = set()
        for _, module in model.named_modules(remove_duplicate=False):
            for name, param in module._parameters.items():
                if param is None or (id(module), name) in seen:
                    continue
                seen.add((id(module), name))
                key = id(param)
                masters[key] = param
                places.setdefault(key, []).append((module, name))
                cast_only[key] = cast_only.get(key, True) and type(module) in CAST_LAYERS
        self.masters: list[nn.Parameter] = []
        self.places: list[list[tuple[nn.Module, str]]] = []
        for key, param in masters.items():
            if cast_only[key] and param.requires_grad and param.dtype == torch.float32 and dtype != torch.float32:
                self.masters.append(param)
                self.places.append(places[key])
        with torch.no_grad():
            self.copies = [nn.Parameter(torch.empty_like(p, dtype=dtype)) for p in self.masters]
            self.wide = [torch.empty_like(p) for p in self.masters]  # the copies' gradients, widened
        self._index = {id(p): i for i, p in enumerate(self.masters)}

    def __len__(self) -> int:
        return len(self.masters)

    @torch.no_grad()
    def refresh(self) -> None:
        """Each copy takes its weight's current value, rounded to the copy's dtype: one multi-tensor copy."""
        if self.copies:
            torch._foreach_copy_(self.copies, self.masters)

    @contextlib.contextmanager
    def swapped(self) -> Iterator[None]:
        """The layers hold the copies in their weights' places meanwhile (what they compute on, and what the
        backward gives gradients to); the weights are back afterwards, whatever happens."""
        try:
            for copy, holders in zip(self.copies, self.places):
                for module, name in holders:
                    module._parameters[name] = copy
            yield
        finally:
            for master, holders in zip(self.masters, self.places):
                for module, name in holders:
                    module._parameters[name] = master

    def clear(self) -> None:
        """No gradients on the copies (before a step's backward, and when training ends)."""
        for copy in self.copies:
            copy.grad = None

    @torch.no_grad()
    def gradients(self) -> dict[int, torch.Tensor]:
        """The fp32 gradient of every weight whose copy got one in the last backward, by `id` of the weight:
        the copies' gradients widened in one multi-tensor copy."""
        live = [i for i, copy in enumerate(self.copies) if copy.grad is not None]
        if not live:
            return {}
        torch._foreach_copy_([self.wide[i] for i in live], [self.copies[i].grad for i in live])
        return {id(self.masters[i]): self.wide[i] for i in live}

    def holds(self, param: torch.Tensor) -> bool:
        """Whether `param` has a copy here."""
        return id(param) in self._index
