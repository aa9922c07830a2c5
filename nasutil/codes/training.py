"""Training loops: the base classifier first, then the code with the base frozen.

The code's targets are the base's outputs (logits), computed once for the training images; every step
draws groups of k images, makes the parity queries, and rebuilds each of the k outputs in turn as if
it were the unavailable one (all single erasures), with the loss on the rebuilt output only.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn as nn

from nasutil.codes.code import Code, code_loss, every_single_erasure

#: Adam as both papers train encoders, decoders and parity models
LEARNING_RATE, WEIGHT_DECAY = 1e-3, 1e-5


def base_optimizer(base: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.Adam(base.parameters(), lr=LEARNING_RATE)


def train_base(base: nn.Module, train: tuple[torch.Tensor, torch.Tensor], epochs: int, batch_size: int,
               device: torch.device, seed: int = 0, on_epoch: Callable[[int, float], None] | None = None, *,
               optimizer: torch.optim.Optimizer | None = None, done: int = 0,
               after_epoch: Callable[[int], None] | None = None) -> None:
    """Cross-entropy with Adam; `on_epoch(epoch, mean loss)` after each epoch.

    A base continued after `done` epochs (its weights and `optimizer` restored) draws the same batches
    as an uninterrupted run: the draws of the finished epochs are replayed. `after_epoch(epoch)` runs
    once an epoch is finished, to store it.
    """
    x, y = train
    base.to(device).train()
    optimizer = optimizer or base_optimizer(base)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(done):
        torch.randperm(len(x), generator=generator)
    for epoch in range(done + 1, epochs + 1):
        total, count = 0.0, 0
        for batch in torch.randperm(len(x), generator=generator).split(batch_size):
            inputs, labels = x[batch].to(device), y[batch].to(device)
            loss = nn.functional.cross_entropy(base(inputs), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total, count = total + loss.item() * len(batch), count + len(batch)
        if after_epoch is not None:
            after_epoch(epoch)
        if on_epoch is not None:
            on_epoch(epoch, total / count)
    base.eval()


@torch.no_grad()
def base_outputs(base: nn.Module, x: torch.Tensor, device: torch.device, batch_size: int = 1024) -> torch.Tensor:
    """The frozen base's logits for every image, on the CPU."""
    base.to(device).eval()
    return torch.cat([base(x[i:i + batch_size].to(device)).float().cpu() for i in range(0, len(x), batch_size)])


def freeze(base: nn.Module) -> None:
    base.eval()
    for p in base.parameters():
        p.requires_grad_(False)


def make_optimizer(code: Code) -> torch.optim.Optimizer | None:
    """Adam over whatever the code trains (encoder, decoder, parity model); None if nothing is trainable."""
    params = [p for p in code.parameters() if p.requires_grad]
    return torch.optim.Adam(params, lr=LEARNING_RATE, weight_decay=WEIGHT_DECAY) if params else None


def groups_of(count: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """A random partition of `count` image indices into groups of k (the remainder left out): G x k."""
    order = torch.randperm(count, generator=generator)
    return order[: count - count % k].view(-1, k)


def train_code_epoch(code: Code, base: nn.Module, x: torch.Tensor, targets: torch.Tensor,
                     optimizer: torch.optim.Optimizer, batch_size: int, device: torch.device,
                     generator: torch.Generator) -> float:
    """One pass over the training images in groups; returns the mean loss."""
    code.to(device).train()
    total, count = 0.0, 0
    for batch in groups_of(len(x), code.spec.k, generator).split(batch_size):
        images, outputs = x[batch].to(device), targets[batch].to(device)  # B x k x C x H x W, B x k x n
        parity = code.parity_outputs(base, images)
        outputs, parity, erased = every_single_erasure(outputs, parity)
        rebuilt = code.rebuild(outputs, parity, erased)
        loss = code_loss(code.spec.loss, rebuilt[erased], outputs[erased])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        total, count = total + loss.item() * len(batch), count + len(batch)
    code.eval()
    return total / max(count, 1)
