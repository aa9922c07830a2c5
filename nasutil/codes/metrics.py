"""How good a code is: the three accuracies of the learned-codes paper, and what it costs.

- reconstruction accuracy: of the unavailable outputs rebuilt, the share whose top class equals the
  base's top class on that query (the decoder's fidelity to the deployed model);
- degraded-mode accuracy: the rebuilt outputs' top class against the true labels;
- normal-mode accuracy: the base's own accuracy (nothing unavailable).
Every group of k test images is scored with each of its k outputs unavailable in turn.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn as nn

from nasutil.codes.code import Code, every_single_erasure
from nasutil.codes.training import base_outputs, groups_of


@dataclass(frozen=True)
class CodeScores:
    reconstruction_accuracy: float
    degraded_accuracy: float
    normal_accuracy: float
    rebuilt: int  # unavailable outputs scored
    chance: float  # the degraded-mode accuracy of a guess

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def score_code(code: Code, base: nn.Module, split: tuple[torch.Tensor, torch.Tensor], device: torch.device,
               batch_size: int = 256, seed: int = 0) -> CodeScores:
    x, y = split
    code.to(device).eval()
    outputs_all = base_outputs(base, x, device)
    groups = groups_of(len(x), code.spec.k, torch.Generator().manual_seed(seed))
    agree = correct = total = 0
    for batch in groups.split(batch_size):
        parity = code.parity_outputs(base, x[batch].to(device)).float().cpu()
        outputs, parity, erased = every_single_erasure(outputs_all[batch], parity)
        rebuilt = code.rebuild(outputs.to(device), parity.to(device), erased.to(device)).float().cpu()
        labels = y[batch].repeat_interleave(code.spec.k, dim=0)
        top = rebuilt[erased].argmax(-1)
        agree += int((top == outputs[erased].argmax(-1)).sum())
        correct += int((top == labels[erased]).sum())
        total += len(top)
    normal = float((outputs_all.argmax(-1) == y).float().mean())
    return CodeScores(agree / total, correct / total, normal, total, 1.0 / outputs_all.shape[1])
