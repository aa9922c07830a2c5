"""The NAS-Bench-101 network as torch modules.

They live apart from `nb101` so that the space (graph checks, parsing, sampling,
encoding) loads without torch; `NasBench101Space.build` imports this module.
The channel rule of a cell (`vertex_channels`) stays in `nb101`.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from nasutil.errors import InvalidArchError
from nasutil_search_spaces.nb101_arch import BN_EPS, BN_MOMENTUM, NB101Arch, vertex_channels


class ConvBNReLU(nn.Sequential):
    """Conv (no bias, 'same' padding) -> BatchNorm -> ReLU, the NAS-Bench-101 conv op and projection."""

    def __init__(self, c_in: int, c_out: int, kernel: int) -> None:
        super().__init__(
            nn.Conv2d(c_in, c_out, kernel, padding=kernel // 2, bias=False),
            nn.BatchNorm2d(c_out, eps=BN_EPS, momentum=BN_MOMENTUM),
            nn.ReLU(inplace=False),
        )


def _make_op(op: str, channels: int) -> nn.Module:
    if op == "conv3x3-bn-relu":
        return ConvBNReLU(channels, channels, 3)
    if op == "conv1x1-bn-relu":
        return ConvBNReLU(channels, channels, 1)
    if op == "maxpool3x3":
        return nn.MaxPool2d(3, stride=1, padding=1)
    raise InvalidArchError(f"unknown NAS-Bench-101 op {op!r}")


class NB101Cell(nn.Module):
    """One cell: vertex t applies its op to the sum of its (truncated) predecessors and the
    projected cell input; the output concatenates its feeders and adds the projected input."""

    def __init__(self, arch: NB101Arch, c_in: int, c_out: int) -> None:
        super().__init__()
        self.matrix = arch.matrix
        n = arch.num_nodes
        self.channels = vertex_channels(arch.matrix, c_in, c_out)
        self.vertex_ops = nn.ModuleList(
            [nn.Identity()] + [_make_op(op, self.channels[t]) for t, op in enumerate(arch.ops[1:-1], start=1)])
        self.projections = nn.ModuleDict(
            {str(t): ConvBNReLU(c_in, self.channels[t], 1) for t in range(1, n) if arch.matrix[0][t]})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, m = len(self.matrix), self.matrix
        values = [x]
        for t in range(1, n - 1):
            width = self.channels[t]
            inputs = [values[s][:, :width] for s in range(1, t) if m[s][t]]
            if m[0][t]:
                inputs.append(self.projections[str(t)](x))
            values.append(self.vertex_ops[t](sum(inputs[1:], inputs[0])))
        feeders = [values[t] for t in range(1, n - 1) if m[t][n - 1]]
        out = torch.cat(feeders, dim=1) if feeders else None
        if m[0][n - 1]:
            projected = self.projections[str(n - 1)](x)
            out = projected if out is None else out + projected
        return out


#: standard deviation of a unit normal truncated at +-2, by which the reference divides
_TRUNC_STD = 0.87962566103423978


@torch.no_grad()
def _truncated_normal_(weight: torch.Tensor, std: float) -> None:
    """Normal(0, std) truncated at +-2 std, by inverting the CDF (much faster than rejection on CPU)."""
    edge = math.erf(2 / math.sqrt(2))  # 2 * Phi(2) - 1
    weight.uniform_(-edge, edge).erfinv_().mul_(std * math.sqrt(2)).clamp_(-2 * std, 2 * std)


class NB101Network(nn.Module):
    """The NAS-Bench-101 network: stem, `num_stacks` x `cells_per_stack` cells, pooling, classifier."""

    def __init__(self, arch: NB101Arch, num_classes: int = 10, stem_channels: int = 128, num_stacks: int = 3,
                 cells_per_stack: int = 3, in_channels: int = 3) -> None:
        super().__init__()
        self.stem = ConvBNReLU(in_channels, stem_channels, 3)
        layers: list[nn.Module] = []
        c_in = c = stem_channels
        for stack in range(num_stacks):
            if stack > 0:
                layers.append(nn.MaxPool2d(2, stride=2, ceil_mode=True))  # TF 'same' padding on odd sizes
                c *= 2
            for _ in range(cells_per_stack):
                layers.append(NB101Cell(arch, c_in, c))
                c_in = c
        self.cells = nn.Sequential(*layers)
        self.classifier = nn.Linear(c, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        """The reference initialisers: fan-in truncated-normal convs, Glorot-uniform classifier."""
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                fan_in = module.in_channels * math.prod(module.kernel_size) // module.groups
                _truncated_normal_(module.weight, math.sqrt(1.0 / fan_in) / _TRUNC_STD)
            elif isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.cells(self.stem(x))
        return self.classifier(x.mean(dim=(2, 3)))
