"""`trace_ops`: a network's operator list (see `nasutil.ops`) read off one forward pass.

Works for any `torch.nn.Module`: hooks on its leaf modules give the convolutions, norms,
activations and pools, and a dispatch mode records the element-wise ops written between
them. Kept apart from `nasutil.ops` because it needs torch, and a space's own listing does not.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from nasutil.ops import Op

ACTIVATIONS = (nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Hardswish, nn.Hardsigmoid, nn.Sigmoid, nn.Tanh,
               nn.LeakyReLU, nn.ELU)
_NO_KERNEL = (nn.Identity, nn.Flatten, nn.Dropout)


def _chw(t: torch.Tensor) -> tuple[int, int, int]:
    shape = tuple(t.shape[1:])
    if len(shape) == 3:
        return shape  # type: ignore[return-value]
    if len(shape) == 1:
        return shape[0], 1, 1
    return math.prod(shape), 1, 1


def _leaf_op(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Op | None:
    if isinstance(module, _NO_KERNEL):
        return None
    (ci, hi, wi), (co, ho, wo) = _chw(x), _chw(y)
    shapes = dict(c_in=ci, h_in=hi, w_in=wi, c_out=co, h_out=ho, w_out=wo)
    if isinstance(module, nn.Conv2d):
        groups = module.groups
        family = "conv" if groups == 1 else "dwconv" if groups == module.in_channels else "gconv"
        return Op(family, **shapes, kernel=module.kernel_size[0], stride=module.stride[0], groups=groups,
                  bias=module.bias is not None, dilation=module.dilation[0])
    if isinstance(module, nn.Linear):
        return Op("linear", **shapes, bias=module.bias is not None)
    if isinstance(module, nn.BatchNorm2d):
        return Op("norm", **shapes, bias=module.affine)
    if isinstance(module, ACTIVATIONS):
        return Op("act", **shapes, variant=type(module).__name__.lower())
    if isinstance(module, (nn.AvgPool2d, nn.MaxPool2d)):
        kernel = module.kernel_size if isinstance(module.kernel_size, int) else module.kernel_size[0]
        stride = module.stride if isinstance(module.stride, int) else module.stride[0]
        variant = "avg" if isinstance(module, nn.AvgPool2d) else "max"
        return Op("pool", **shapes, kernel=kernel, stride=stride, variant=variant)
    if isinstance(module, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)):
        return Op("gpool", **shapes, variant="avg" if isinstance(module, nn.AdaptiveAvgPool2d) else "max")
    if type(module).__name__ == "Zero":
        return Op("scale", **shapes, variant="zero")
    return Op("other", **shapes, variant=type(module).__name__.lower())


_VIEW_OPS = {"view", "_unsafe_view", "reshape", "flatten", "slice", "select", "t", "expand", "detach", "alias",
             "as_strided", "unsqueeze", "squeeze", "permute", "transpose", "contiguous", "clone", "lift_fresh",
             "_to_copy", "empty_like", "zeros_like"}


class _FunctionalOps(TorchDispatchMode):
    """Records element-wise ops that run outside leaf modules (residual adds, gates, `sum`)."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.ops: list[Op] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.depth == 0 and isinstance(out, torch.Tensor) and out.dim() >= 2:
            self._record(func.overloadpacket.__name__.rstrip("_"), args, out)
        return out

    def _record(self, name: str, args: tuple, out: torch.Tensor) -> None:
        if name in _VIEW_OPS:
            return
        tensors = [a for a in args if isinstance(a, torch.Tensor) and a.dim() >= 2]
        c, h, w = _chw(out)
        shapes = dict(c_in=c, h_in=h, w_in=w, c_out=c, h_out=h, w_out=w)
        if name in ("add", "mul", "sub", "div") and len(tensors) == 2:
            if name in ("add", "sub"):
                self.ops.append(Op("add", **shapes))
            else:
                same = tensors[0].shape == tensors[1].shape
                self.ops.append(Op("mul", **shapes, variant="" if same else "broadcast"))
        elif name in ("add", "mul", "sub", "div") and len(tensors) == 1:
            self.ops.append(Op("scale", **shapes, variant=name))
        elif name == "cat":
            self.ops.append(Op("cat", **shapes))
        else:
            self.ops.append(Op("other", **shapes, variant=name))


def trace_ops(model: nn.Module, input_size: int, in_channels: int = 3) -> list[Op]:
    """Run `model` once on a single zero image (eval, no grad) and list its ops in order."""
    from nasutil.counting import forward_single_image

    recorder = _FunctionalOps()

    def pre_hook(module, args):
        recorder.depth += 1

    def post_hook(module, args, output):
        recorder.depth -= 1
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if x is not None and isinstance(output, torch.Tensor):
            op = _leaf_op(module, x, output)
            if op is not None:
                recorder.ops.append(op)

    forward_single_image(model, input_size, in_channels, lambda name, module: (pre_hook, post_hook), recorder)
    return recorder.ops
