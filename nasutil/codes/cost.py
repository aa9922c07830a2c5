"""What a code adds per group of k queries, in FLOPs, against replication.

Replication protects k queries by running each twice (k extra base inferences); a code runs the
encoder once, r parity inferences (the base, or the parity model) and the decoder. FLOPs follow
`torch.utils.flop_counter` (a multiply-add is 2), as everywhere in nasutil; the time these take on a
GPU is measured separately.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

from nasutil.codes.code import Code


@dataclass(frozen=True)
class CodeCost:
    base_flops: int  # one query through the base
    encoder_flops: int  # per group
    parity_flops: int  # per group: r parity queries
    decoder_flops: int  # per group, one erasure
    k: int

    @property
    def overhead(self) -> float:
        """Extra FLOPs per group over the k base inferences it protects."""
        return (self.encoder_flops + self.parity_flops + self.decoder_flops) / (self.k * self.base_flops)

    @property
    def replication_overhead(self) -> float:
        return 1.0

    def to_dict(self) -> dict:
        return {**asdict(self), "overhead": self.overhead}


def _flops(fn) -> int:
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


@torch.no_grad()
def code_cost(code: Code, base: nn.Module, shape: tuple[int, int, int], num_classes: int) -> CodeCost:
    device = next(base.parameters()).device
    k, r = code.spec.k, code.spec.r
    was_training = code.training
    code.eval()
    group = torch.zeros(1, k, *shape, device=device)
    parity_in = code.encoder(group)
    run = code.parity_model if code.parity_model is not None else base
    outputs = torch.zeros(1, k, num_classes, device=device)
    parity = torch.zeros(1, r, num_classes, device=device)
    erased = torch.zeros(1, k, dtype=torch.bool, device=device)
    erased[0, 0] = True
    cost = CodeCost(base_flops=_flops(lambda: base(group[:, 0])), encoder_flops=_flops(lambda: code.encoder(group)),
                    parity_flops=_flops(lambda: run(parity_in.flatten(0, 1))),
                    decoder_flops=_flops(lambda: code.decoder(outputs, parity, erased)), k=k)
    code.train(was_training)
    return cost
