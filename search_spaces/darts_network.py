"""The DARTS CIFAR evaluation network as torch modules.

They live apart from `darts` so that the space (genotype parsing, sampling,
encoding) loads without torch; `DartsSpace.build` imports this module.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from nasutil.errors import InvalidArchError
from nasutil_search_spaces._blocks import ReLUConvBN
from collections.abc import Callable

from nasutil_search_spaces.darts_arch import OPS, Cell, DartsArch


class FactorizedReduce(nn.Module):
    """Halve the resolution with two stride-2 1x1 convs on offset grids, concatenated (DARTS).

    The second path reads the input shifted by one pixel; padding at the far edge
    keeps both paths the same size for odd resolutions too (identical for even ones).
    """

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.relu = nn.ReLU(inplace=False)
        self.conv_1 = nn.Conv2d(c_in, c_out // 2, 1, stride=2, bias=False)
        self.conv_2 = nn.Conv2d(c_in, c_out - c_out // 2, 1, stride=2, bias=False)
        self.bn = nn.BatchNorm2d(c_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(x)
        shifted = F.pad(x, (0, 1, 0, 1))[:, :, 1:, 1:]
        return self.bn(torch.cat([self.conv_1(x), self.conv_2(shifted)], dim=1))


class SepConv(nn.Sequential):
    """Two stacked ReLU -> depthwise conv -> pointwise conv -> BN (only the first may stride)."""

    def __init__(self, c: int, kernel: int, stride: int) -> None:
        pad = kernel // 2
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c, c, kernel, stride=stride, padding=pad, groups=c, bias=False),
            nn.Conv2d(c, c, 1, bias=False),
            nn.BatchNorm2d(c),
            nn.ReLU(inplace=False),
            nn.Conv2d(c, c, kernel, stride=1, padding=pad, groups=c, bias=False),
            nn.Conv2d(c, c, 1, bias=False),
            nn.BatchNorm2d(c),
        )


class DilConv(nn.Sequential):
    """ReLU -> dilated (rate 2) depthwise conv -> pointwise conv -> BN."""

    def __init__(self, c: int, kernel: int, stride: int) -> None:
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c, c, kernel, stride=stride, padding=kernel - 1, dilation=2, groups=c, bias=False),
            nn.Conv2d(c, c, 1, bias=False),
            nn.BatchNorm2d(c),
        )


def make_op(op: str, c: int, stride: int) -> nn.Module:
    """One DARTS op on `c` channels, as in the evaluation network."""
    if op == "max_pool_3x3":
        return nn.MaxPool2d(3, stride=stride, padding=1)
    if op == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=stride, padding=1, count_include_pad=False)
    if op == "skip_connect":
        return nn.Identity() if stride == 1 else FactorizedReduce(c, c)
    if op in ("sep_conv_3x3", "sep_conv_5x5"):
        return SepConv(c, int(op[-1]), stride)
    if op in ("dil_conv_3x3", "dil_conv_5x5"):
        return DilConv(c, int(op[-1]), stride)
    raise InvalidArchError(f"unknown DARTS op {op!r} (ops: {', '.join(OPS)})")


OpMaker = Callable[[str, int, int], nn.Module]  # (op name, channels, stride) -> module


class DartsCell(nn.Module):
    """One cell: preprocess both inputs to `c` channels, build its nodes (each the sum of its edges' ops),
    concatenate them (4*c channels for DARTS). `op_maker` builds an op; the `cell` generator passes one
    that reads its op registry."""

    def __init__(self, nodes: Cell, c_prev_prev: int, c_prev: int, c: int, reduction: bool,
                 reduction_prev: bool, op_maker: OpMaker = make_op) -> None:
        super().__init__()
        self.reduction = reduction
        self.preprocess0 = FactorizedReduce(c_prev_prev, c) if reduction_prev else ReLUConvBN(c_prev_prev, c, 1, 1, 0)
        self.preprocess1 = ReLUConvBN(c_prev, c, 1, 1, 0)
        self.inputs = [src for node in nodes for _, src in node]
        self.per_node = [len(node) for node in nodes]
        # Only edges from the two cell inputs stride in a reduction cell.
        self.ops = nn.ModuleList(op_maker(op, c, 2 if reduction and src < 2 else 1)
                                 for node in nodes for op, src in node)

    def forward(self, s0: torch.Tensor, s1: torch.Tensor) -> torch.Tensor:
        states = [self.preprocess0(s0), self.preprocess1(s1)]
        e = 0
        for count in self.per_node:
            out = self.ops[e](states[self.inputs[e]])
            for k in range(e + 1, e + count):
                out = out + self.ops[k](states[self.inputs[k]])
            states.append(out)
            e += count
        return torch.cat(states[2:], dim=1)


class DartsNetwork(nn.Module):
    """The DARTS CIFAR evaluation network (without the auxiliary head and drop-path)."""

    def __init__(self, arch: DartsArch, C: int = 16, layers: int = 8, num_classes: int = 10,
                 in_channels: int = 3, op_maker: OpMaker = make_op, stem_multiplier: int = 3) -> None:
        super().__init__()
        c_stem = stem_multiplier * C
        self.stem = nn.Sequential(nn.Conv2d(in_channels, c_stem, 3, padding=1, bias=False), nn.BatchNorm2d(c_stem))
        c_prev_prev, c_prev, c = c_stem, c_stem, C
        reduction_prev = False
        self.cells = nn.ModuleList()
        for i in range(layers):
            reduction = i in (layers // 3, 2 * layers // 3)
            if reduction:
                c *= 2
            self.cells.append(DartsCell(arch.reduce if reduction else arch.normal, c_prev_prev, c_prev, c,
                                        reduction, reduction_prev, op_maker))
            reduction_prev = reduction
            c_prev_prev, c_prev = c_prev, arch.shape.nodes * c
        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c_prev, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = s1 = self.stem(x)
        for cell in self.cells:
            s0, s1 = s1, cell(s0, s1)
        return self.classifier(self.global_pooling(s1).flatten(1))
