"""Small torch building blocks shared by the cell-based spaces' networks (imported by the `*_network` modules only)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn


class ReLUConvBN(nn.Sequential):
    """ReLU -> Conv (no bias) -> BatchNorm, the NAS-Bench-201/DARTS convolution op."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, padding: int, dilation: int = 1,
                 affine: bool = True) -> None:
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, dilation=dilation, bias=False),
            nn.BatchNorm2d(c_out, affine=affine),
        )


class Zero(nn.Module):
    """The `none` op: an all-zero output of the right shape (computed, as in the reference networks)."""

    def __init__(self, stride: int = 1, c_out: int | None = None) -> None:
        super().__init__()
        self.stride = stride
        self.c_out = c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride > 1:
            x = x[:, :, :: self.stride, :: self.stride]
        if self.c_out is not None and self.c_out != x.shape[1]:
            shape = (x.shape[0], self.c_out, *x.shape[2:])
            return x.new_zeros(shape)
        return x.mul(0.0)


def training_node_sum(edges: Sequence[tuple[nn.Module, bool]], inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """A cell node's value while training: the sum of its edges' outputs (edge k applied to `inputs[k]`;
    each edge with whether its output is all zeros), with the all-zero edges left out and the rest added
    pairwise rather than from Python's 0. The value is the same (adding zeros changes nothing); each zero
    edge left out saves its multiply and its gradient's, and the sum one add less: a captured step of a small
    network is paced by how many kernels it launches. Where every edge is zero, the first one gives the
    zeros. A node whose every way to the output runs through zero edges then gets no gradient, nor do the
    weights before it (computing every edge gave them zeros, which weight decay turned into shrinking):
    the step leaves them as they are, and they cannot change the output. In eval mode cells compute every
    edge, as the reference networks (and the measured tables) do."""
    live = [edge(x) for (edge, zero), x in zip(edges, inputs) if not zero]
    if not live:
        return edges[0][0](inputs[0])
    total = live[0]
    for term in live[1:]:
        total = total + term
    return total


def cell_forward(into: Sequence[Sequence[tuple[nn.Module, bool]]], x: torch.Tensor, training: bool) -> torch.Tensor:
    """A cell's output, its last node: node i sums `into[i]`'s edges (each with whether it is all zeros) applied
    to the nodes before it; in training without the zero edges (`training_node_sum`), in eval mode every edge,
    summed from Python's 0 as the reference networks do."""
    nodes = [x]
    for edges in into[1:]:
        if training:
            nodes.append(training_node_sum(edges, nodes))
        else:
            nodes.append(sum(edge(nodes[j]) for j, (edge, _) in enumerate(edges)))
    return nodes[-1]
