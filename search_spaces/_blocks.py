"""Small torch building blocks shared by the cell-based spaces' networks (imported by the `*_network` modules only)."""

from __future__ import annotations

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
