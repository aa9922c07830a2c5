"""The NAS-Bench-201 network as torch modules.

They live apart from `nb201` so that the space (parsing, sampling, encoding,
op listing) loads without torch; `NasBench201Space.build` imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from nasutil.errors import InvalidArchError
from nasutil_search_spaces._blocks import ReLUConvBN, Zero, cell_forward
from nasutil_search_spaces.nb201_arch import EDGES, NUM_NODES, NB201Arch


def _make_op(op: str, channels: int) -> nn.Module:
    if op == "none":
        return Zero()
    if op == "skip_connect":
        return nn.Identity()
    if op == "nor_conv_1x1":
        return ReLUConvBN(channels, channels, 1, 1, 0)
    if op == "nor_conv_3x3":
        return ReLUConvBN(channels, channels, 3, 1, 1)
    if op == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    raise InvalidArchError(f"unknown NAS-Bench-201 op {op!r}")


class Cell(nn.Module):
    """A searched cell: node i is the sum of op(i<-j)(node j) over j < i; the output is the last node.
    Training leaves the `none` edges out of the sums (`training_node_sum`: the same values, fewer kernels)."""

    def __init__(self, arch: NB201Arch, channels: int) -> None:
        super().__init__()
        self.channels = channels
        self.edges = nn.ModuleDict({f"{i}<-{j}": _make_op(op, channels) for (i, j), op in zip(EDGES, arch.ops)})
        self._into = [[(self.edges[f"{i}<-{j}"], isinstance(self.edges[f"{i}<-{j}"], Zero)) for j in range(i)]
                      for i in range(NUM_NODES)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cell_forward(self._into, x, self.training)


class ResidualReduction(nn.Module):
    """The fixed reduction block: a stride-2 basic residual block with an avgpool+1x1 shortcut. The pool
    rounds up, as the stride-2 convolution does: an odd size (a 28x28 input's 7 after two halvings, or 30's
    15) gives both paths one size; rounding down, their sum failed. An even size is halved either way."""

    def __init__(self, c_in: int, c_out: int) -> None:
        super().__init__()
        self.conv_a = ReLUConvBN(c_in, c_out, 3, 2, 1)
        self.conv_b = ReLUConvBN(c_out, c_out, 3, 1, 1)
        self.downsample = nn.Sequential(nn.AvgPool2d(2, stride=2, ceil_mode=True),
                                        nn.Conv2d(c_in, c_out, 1, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(x) + self.conv_b(self.conv_a(x))


class NB201Network(nn.Module):
    def __init__(self, arch: NB201Arch, num_classes: int = 10, channels: int = 16, cells_per_stage: int = 5,
                 in_channels: int = 3) -> None:
        super().__init__()
        # what the networks of one fused group must share (see `fuse`): all but the cell
        self.skeleton = (num_classes, channels, cells_per_stage, in_channels)
        self.stem = nn.Sequential(nn.Conv2d(in_channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        blocks: list[nn.Module] = []
        c = channels
        for stage in range(3):
            if stage > 0:
                blocks.append(ResidualReduction(c, c * 2))
                c *= 2
            blocks.extend(Cell(arch, c) for _ in range(cells_per_stage))
        self.cells = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=False), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.head(self.cells(self.stem(x))))

    # Horizontal fusion: the `fused` co-location strategy runs a group of these networks as one
    # (`nasutil_search_spaces.nb201_fused`).

    @classmethod
    def fusion_obstacle(cls, networks: Sequence[nn.Module]) -> str | None:
        """Why `networks` cannot run as one fused network, or None where they can."""
        if not all(type(n) is cls for n in networks):
            return "NAS-Bench-201 fusion needs every network to be an nb201 network"
        if len({n.skeleton for n in networks}) > 1:
            return "NAS-Bench-201 fusion needs one skeleton (classes, channels, cells per stage, input channels)"
        if any(n.training for n in networks):
            return "NAS-Bench-201 fusion folds BatchNorm and runs in eval mode only"
        if len({(p.device, p.dtype) for n in networks for p in n.parameters()}) > 1:
            return "NAS-Bench-201 fusion needs every network on one device in one dtype"
        return None

    @classmethod
    def fuse(cls, networks: Sequence[nn.Module], shared_input: bool) -> nn.Module:
        """One module computing every network: `module(inputs)` takes one input per network (or the one
        shared by all, with shared_input=True) and returns one output per network."""
        from nasutil_search_spaces.nb201_fused import FusedNB201Group

        with torch.no_grad():
            return FusedNB201Group(networks, shared_input)
