"""A code: what an encoder, a parity computation and a decoder make together, and its settings.

Two designs share one shape. A learned code (Kosaian et al. 2018) trains the encoder and decoder and
runs the parity queries through the deployed base itself (`parity="base"`). A parity model (Kosaian
et al. 2019) fixes the encoder (`sum`, `concat`) and decoder (`subtract`) and trains a separate
parity network `F_P` (`parity="copy"`, the base's own architecture, or a base spec such as `lenet5`
or `nb201:ARCH`). In both the base stays frozen: its outputs are the targets.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from nasutil.codes.bases import build_base
from nasutil.codes.decoders import build_decoder
from nasutil.codes.encoders import build_encoder
from nasutil.codes.settings import LOSSES, MAX_K, CodeSpec  # noqa: F401  (declared with the settings)

class Code(nn.Module):
    """Encoder, optional parity model and decoder; `rebuild` runs a group through them."""

    def __init__(self, spec: CodeSpec, base_spec: str, shape: tuple[int, int, int], num_classes: int) -> None:
        super().__init__()
        self.spec = spec.check()
        self.encoder = build_encoder(spec.encoder, spec.k, spec.r, shape)
        self.decoder = build_decoder(spec.decoder, spec.k, spec.r, num_classes)
        self.parity_model: nn.Module | None = None
        if spec.trains_parity_model:
            parity_spec = base_spec if spec.parity == "copy" else spec.parity
            self.parity_model = build_base(parity_spec, shape[0], shape[1], num_classes)

    def parity_outputs(self, base: nn.Module, groups: torch.Tensor) -> torch.Tensor:
        """B x k x C x H x W queries -> B x r x n parity outputs."""
        parity = self.encoder(groups)
        run = self.parity_model if self.parity_model is not None else base
        b, r = parity.shape[:2]
        return run(parity.flatten(0, 1)).view(b, r, -1)

    def rebuild(self, outputs: torch.Tensor, parity: torch.Tensor, erased: torch.Tensor) -> torch.Tensor:
        """Outputs B x k x n (the erased ones are never read), parity B x r x n, erased B x k bool -> B x k x n."""
        return self.decoder(outputs, parity, erased)


def every_single_erasure(outputs: torch.Tensor, parity: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each group repeated k times, slot j unavailable in copy j: all single erasures, as the learned-codes
    training and evaluation simulate them. Returns outputs, parity (B*k x ...) and the erasure mask."""
    b, k = outputs.shape[:2]
    erased = torch.eye(k, dtype=torch.bool, device=outputs.device).repeat(b, 1)  # B*k x k
    return outputs.repeat_interleave(k, dim=0), parity.repeat_interleave(k, dim=0), erased


def code_loss(kind: str, rebuilt: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """On the erased slots only (rows of `rebuilt` and `target` already selected)."""
    if kind == "kl":
        return nn.functional.kl_div(rebuilt.log_softmax(-1), target.softmax(-1), reduction="batchmean")
    return nn.functional.mse_loss(rebuilt, target)
