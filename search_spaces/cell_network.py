"""The networks of a generated cell space, as torch modules (kept apart so that `cell` loads without torch).

Module names follow the `nb201` network's (`stem`, `cells`, `head`, `classifier`, edges `"i<-j"`), so the
NAS-Bench-201 preset's state dicts are interchangeable with the dedicated space's.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from nasutil.cell_ops import cell_op
from nasutil_search_spaces._blocks import cell_forward
from nasutil_search_spaces.cell_arch import CellConfig
from nasutil_search_spaces.nb201_network import ResidualReduction


class GeneratedCell(nn.Module):
    """Node i is the sum of op(i<-j)(node j) over j < i; the output is the last node. Training leaves the
    all-zero ops' edges out of the sums (`training_node_sum`: the same values, fewer kernels)."""

    def __init__(self, ops: tuple[str, ...], config: CellConfig, channels: int) -> None:
        super().__init__()
        self.nodes = config.nodes
        self.edges = nn.ModuleDict({f"{i}<-{j}": cell_op(op).build(channels)
                                    for (i, j), op in zip(config.edges, ops)})
        zero = {f"{i}<-{j}": cell_op(op).zero for (i, j), op in zip(config.edges, ops)}
        self._into = [[(self.edges[f"{i}<-{j}"], zero[f"{i}<-{j}"]) for j in range(i)] for i in range(self.nodes + 1)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cell_forward(self._into, x, self.training)


class CellNetwork(nn.Module):
    def __init__(self, ops: tuple[str, ...], config: CellConfig, num_classes: int = 10) -> None:
        super().__init__()
        c = config.channels
        self.stem = nn.Sequential(nn.Conv2d(config.in_channels, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        blocks: list[nn.Module] = []
        for stage in range(config.stages):
            if stage > 0:
                blocks.append(ResidualReduction(c, c * 2))
                c *= 2
            blocks.extend(GeneratedCell(ops, config, c) for _ in range(config.cells_per_stage))
        self.cells = nn.Sequential(*blocks)
        self.head = nn.Sequential(nn.BatchNorm2d(c), nn.ReLU(inplace=False), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.head(self.cells(self.stem(x))))


def chosen_network(arch, config: CellConfig, num_classes: int) -> nn.Module:
    """A chosen-inputs (DARTS-style) space's network: DARTS's evaluation skeleton over the registry's ops."""
    from nasutil_search_spaces.darts_network import DartsNetwork

    def op_maker(name: str, channels: int, stride: int) -> nn.Module:
        op = cell_op(name)
        return op.build(channels) if stride == 1 else op.reduce(channels)

    return DartsNetwork(arch, C=config.channels, layers=config.layers, num_classes=num_classes,
                        in_channels=config.in_channels, op_maker=op_maker, stem_multiplier=config.stem_multiplier)
