"""FLOP and memory-traffic counts of one forward pass, per image and per layer.

FLOPs come from `torch.utils.flop_counter.FlopCounterMode` (a multiply-add counts
2; pooling, normalisation and element-wise ops count 0, as in that counter).
Per-layer figures are taken with forward hooks on the leaf modules, reading the
counter's running total before and after each one. Memory traffic is the
element count of each leaf's inputs, outputs and parameters: a lower bound on
what an unfused kernel moves, scaled by the dtype's size where bytes are asked for.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from nasutil.errors import NasutilError

_CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)


@dataclass(frozen=True)
class LayerStats:
    """One leaf module's share of a forward pass of a single image."""

    name: str
    kind: str
    module: str
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    params: int
    flops: int
    input_elems: int
    output_elems: int

    def bytes(self, elem_size: int = 4) -> int:
        return (self.input_elems + self.output_elems + self.params) * elem_size

    def arithmetic_intensity(self, elem_size: int = 4) -> float:
        moved = self.bytes(elem_size)
        return self.flops / moved if moved else 0.0


@dataclass(frozen=True)
class ModelCounts:
    """Counts of a whole network for one image."""

    params: int
    flops_per_image: int
    input_size: int
    layers: list[LayerStats] = field(default_factory=list)

    def bytes_per_image(self, elem_size: int = 4) -> int:
        """Activation traffic of every leaf for one image plus the weights read once."""
        return sum((l.input_elems + l.output_elems) * elem_size for l in self.layers) + self.params * elem_size

    def to_dict(self, with_layers: bool = True) -> dict:
        out = {"params": self.params, "flops_per_image": self.flops_per_image, "input_size": self.input_size,
               "bytes_per_image_fp32": self.bytes_per_image(4)}
        if with_layers:
            out["layers"] = [asdict(l) for l in self.layers]
        return out


def layer_kind(module: nn.Module) -> str:
    """A coarse operator class: what decides how well a layer can use a GPU."""
    if isinstance(module, _CONV_TYPES):
        groups, cin, cout = module.groups, module.in_channels, module.out_channels
        size = "x".join(str(k) for k in module.kernel_size)
        if groups == 1:
            return f"conv{size}"
        if groups == cin and cout % cin == 0:
            return f"dwconv{size}"
        return f"gconv{size}"
    if isinstance(module, nn.Linear):
        return "linear"
    if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.GroupNorm, nn.LayerNorm)):
        return "norm"
    if isinstance(module, (nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
        return "pool"
    if isinstance(module, (nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Hardswish, nn.Hardsigmoid, nn.Sigmoid, nn.Tanh)):
        return "act"
    return type(module).__name__.lower()


def _elems(value: object) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, (tuple, list)):
        return sum(_elems(v) for v in value)
    if isinstance(value, dict):
        return sum(_elems(v) for v in value.values())
    return 0


def _shape(value: object) -> tuple[int, ...]:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape[1:])
    if isinstance(value, (tuple, list)) and value:
        return _shape(value[0])
    return ()


def leaf_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """Modules without children: the layers that per-layer figures are reported for."""
    return [(n, m) for n, m in model.named_modules() if next(m.children(), None) is None]


class InputSizeError(NasutilError, ValueError):
    """An image size or channel count that no network can take (not a positive whole number)."""


def forward_single_image(model: nn.Module, input_size: int, in_channels: int = 3,
                         leaf_hooks: Callable[[str, nn.Module], tuple[Callable, Callable]] | None = None,
                         context: contextlib.AbstractContextManager | None = None) -> None:
    """One eval-mode, no-grad forward of a zero image (on the model's device, one CPU thread), with the
    (pre, post) forward hooks `leaf_hooks(name, module)` returns on every leaf module, inside `context`."""
    for what, value in (("input_size", input_size), ("in_channels", in_channels)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise InputSizeError(f"{what} must be a whole number of at least 1 (got {value!r})")
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    dtype = param.dtype if param is not None and param.is_floating_point() else torch.float32
    x = torch.zeros(1, int(in_channels), int(input_size), int(input_size), device=device, dtype=dtype)
    was_training = model.training
    model.eval()
    handles = []
    for name, module in leaf_modules(model) if leaf_hooks else ():
        pre, post = leaf_hooks(name, module)
        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a batch-1 pass gains nothing from threads and suffers from oversubscription
    try:
        with torch.no_grad(), context or contextlib.nullcontext():
            model(x)
    finally:
        torch.set_num_threads(threads)
        for h in handles:
            h.remove()
        model.train(was_training)


def count_model(model: nn.Module, input_size: int, in_channels: int = 3, per_layer: bool = True) -> ModelCounts:
    """Count one forward pass of a single image (eval mode, no gradients, on CPU or the model's device)."""
    if not isinstance(model, nn.Module):  # an Arch once failed as "has no attribute 'parameters'"
        raise NasutilError(f"count_model takes a torch module (an arch's network: space.build(arch)), got "
                           f"{type(model).__name__}")
    counter = FlopCounterMode(display=False)
    layers: list[LayerStats] = []
    starts: dict[int, int] = {}

    def hooks(name: str, module: nn.Module) -> tuple[Callable, Callable]:
        def pre_hook(mod, args):
            starts[id(mod)] = counter.get_total_flops()

        def post_hook(mod, args, output):
            flops = counter.get_total_flops() - starts.pop(id(mod), counter.get_total_flops())
            layers.append(LayerStats(
                name=name or type(mod).__name__, kind=layer_kind(mod), module=type(mod).__name__,
                input_shape=_shape(args), output_shape=_shape(output),
                params=sum(p.numel() for p in mod.parameters(recurse=False)), flops=int(flops),
                input_elems=_elems(args), output_elems=_elems(output)))

        return pre_hook, post_hook

    try:
        forward_single_image(model, input_size, in_channels, hooks if per_layer else None, counter)
    except RuntimeError as exc:  # a grey space counted as RGB failed deep inside torch
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NasutilError(f"count_model could not run the network on one {in_channels}x{input_size}x{input_size} "
                           f"image (in_channels, input_size: a space's own are space.in_channels and "
                           f"space.default_input_size): {detail[:300]}") from None
    return ModelCounts(params=count_params(model), flops_per_image=int(counter.get_total_flops()),
                       input_size=input_size, layers=layers)


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
