"""Decoders: the k outputs (unavailable ones zeroed) and the r parity outputs in, k outputs rebuilt.

`mlp` is learned (Kosaian et al. 2018: (k+r)*n -> ReLU -> k*n -> ReLU -> k*n); `subtract` is the
parity-models decoder, F(Xj) = F_P(P) - sum of the other available outputs, which is right when the
parity model learns F_P(X1 + ... + Xk) = F(X1) + ... + F(Xk).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from nasutil.codes.settings import DECODERS  # the names are settings: declared there
from nasutil.errors import NasutilError


class MLPDecoder(nn.Module):
    def __init__(self, k: int, r: int, n: int) -> None:
        super().__init__()
        self.k, self.n = k, n
        self.net = nn.Sequential(nn.Linear((k + r) * n, k * n), nn.ReLU(), nn.Linear(k * n, k * n), nn.ReLU(),
                                 nn.Linear(k * n, k * n))

    def forward(self, outputs: torch.Tensor, parity: torch.Tensor, erased: torch.Tensor) -> torch.Tensor:
        available = outputs.masked_fill(erased.unsqueeze(-1), 0.0)
        return self.net(torch.cat([available, parity], dim=1).flatten(1)).view(len(outputs), self.k, self.n)


class SubtractionDecoder(nn.Module):
    def forward(self, outputs: torch.Tensor, parity: torch.Tensor, erased: torch.Tensor) -> torch.Tensor:
        available = outputs.masked_fill(erased.unsqueeze(-1), 0.0).sum(dim=1, keepdim=True)
        rebuilt = parity[:, :1] - available  # right for the one erased slot of each group
        return torch.where(erased.unsqueeze(-1), rebuilt, outputs)


def build_decoder(name: str, k: int, r: int, n: int) -> nn.Module:
    if name == "mlp":
        return MLPDecoder(k, r, n)
    if name == "subtract":
        if r != 1:
            raise NasutilError(f"the subtract decoder rebuilds from one parity output (r = 1), not {r}")
        return SubtractionDecoder()
    raise NasutilError(f"unknown decoder {name!r} (choose from {', '.join(DECODERS)})")
