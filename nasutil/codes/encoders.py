"""Encoders: k queries in, r parity queries out, each of the queries' shape.

Learned (`mlp`, `conv`; Kosaian et al. 2018) or fixed (`sum`, `concat`; the parity-models design:
the pixel-wise sum of the k images, or the k images shrunk and tiled into one). All map a batch of
groups B x k x C x H x W to B x r x C x H x W.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from nasutil.codes.settings import ENCODERS, LEARNED_ENCODERS  # noqa: F401  (settings' names: declared there)
from nasutil.errors import NasutilError


class MLPEncoder(nn.Module):
    """Flattened k queries -> k*d -> ReLU -> r*d."""

    def __init__(self, k: int, r: int, shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.k, self.r, self.shape = k, r, shape
        d = shape[0] * shape[1] * shape[2]
        self.net = nn.Sequential(nn.Linear(k * d, k * d), nn.ReLU(), nn.Linear(k * d, r * d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1)).view(len(x), self.r, *self.shape)


class ConvEncoder(nn.Module):
    """The k queries as k*C channels; six 3x3 convolutions of 20k channels, dilated 1, 1, 2, 4, 8, 1 so the
    receptive field covers a small image, then a 1x1 convolution to r*C channels."""

    def __init__(self, k: int, r: int, shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.k, self.r, self.shape = k, r, shape
        layers: list[nn.Module] = []
        c_in = k * shape[0]
        for dilation in (1, 1, 2, 4, 8, 1):
            layers += [nn.Conv2d(c_in, 20 * k, 3, padding=dilation, dilation=dilation), nn.ReLU()]
            c_in = 20 * k
        layers.append(nn.Conv2d(c_in, r * shape[0], 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.net(x.flatten(1, 2))
        return out.view(len(x), self.r, *self.shape)


class SumEncoder(nn.Module):
    """P = X1 + ... + Xk."""

    r = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1, keepdim=True)


class ConcatEncoder(nn.Module):
    """k = 2: both images squeezed to half width, side by side; k = 4: each to a quarter, in quadrants."""

    r = 1

    def __init__(self, k: int) -> None:
        super().__init__()
        if k not in (2, 4):
            raise NasutilError(f"the concat encoder takes k = 2 or 4, got k = {k}")
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, k, c, h, w = x.shape
        if k == 2:
            small = F.interpolate(x.flatten(0, 1), size=(h, w // 2), mode="bilinear", align_corners=False)
            small = small.view(b, 2, c, h, w // 2)
            tiled = torch.cat([small[:, 0], small[:, 1]], dim=-1)
        else:
            small = F.interpolate(x.flatten(0, 1), size=(h // 2, w // 2), mode="bilinear", align_corners=False)
            small = small.view(b, 4, c, h // 2, w // 2)
            top, bottom = torch.cat([small[:, 0], small[:, 1]], -1), torch.cat([small[:, 2], small[:, 3]], -1)
            tiled = torch.cat([top, bottom], -2)
        return F.interpolate(tiled, size=(h, w), mode="nearest").unsqueeze(1) if tiled.shape[-2:] != (h, w) \
            else tiled.unsqueeze(1)


def build_encoder(name: str, k: int, r: int, shape: tuple[int, int, int]) -> nn.Module:
    if name == "mlp":
        return MLPEncoder(k, r, shape)
    if name == "conv":
        return ConvEncoder(k, r, shape)
    if name in ("sum", "concat") and r != 1:
        raise NasutilError(f"the {name} encoder makes one parity query (r = 1), not {r}")
    if name == "sum":
        return SumEncoder()
    if name == "concat":
        return ConcatEncoder(k)
    raise NasutilError(f"unknown encoder {name!r} (choose from {', '.join(ENCODERS)})")
