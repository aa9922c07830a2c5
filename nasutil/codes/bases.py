"""The deployed classifiers a code protects: the papers' small bases, ResNet-18, and any nasutil arch.

A base is named by a spec: `mlp` (784-200-100-10 with ReLU, the learned-codes paper's Base-MLP, sized
to the input), `lenet5`, `resnet18` (the CIFAR variant: 3x3 stride-1 stem, four stages of two basic
blocks, global pooling), or `SPACE:ARCH` for an architecture of a registered search space (a search's
Pareto-front pick, say). Grey images enter a 3-channel network through a stem that repeats the channel.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from nasutil.errors import NasutilError

BASES = ("mlp", "lenet5", "resnet18")


def build_base(spec: str, channels: int, input_size: int, num_classes: int) -> nn.Module:
    """A freshly initialised classifier for `channels` x `input_size`^2 images."""
    if spec == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(channels * input_size ** 2, 200), nn.ReLU(),
                             nn.Linear(200, 100), nn.ReLU(), nn.Linear(100, num_classes))
    if spec == "lenet5":
        return _lenet5(channels, input_size, num_classes)
    if spec == "resnet18":
        return ResNet18(channels, num_classes)
    if ":" in spec:
        return _space_arch(spec, channels, input_size, num_classes)
    raise NasutilError(f"unknown base {spec!r}: choose {', '.join(BASES)} or SPACE:ARCH (e.g. nb201:'|...|')")


def _lenet5(channels: int, input_size: int, num_classes: int) -> nn.Module:
    if input_size < 12:
        raise NasutilError(f"lenet5 needs images of at least 12x12, got {input_size}x{input_size}")
    after = ((input_size // 2) - 4) // 2  # conv 5x5 padded, pool, conv 5x5, pool
    return nn.Sequential(nn.Conv2d(channels, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * after * after, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, num_classes))


class _BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out),
                                  nn.ReLU(), nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out))
        self.skip = nn.Identity() if stride == 1 and c_in == c_out else nn.Sequential(
            nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.skip(x))


class ResNet18(nn.Module):
    """ResNet-18 for small images: 3x3 stride-1 stem, stages of 64/128/256/512 channels, global pooling."""

    def __init__(self, channels: int, num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(channels, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()]
        c = 64
        for i, width in enumerate((64, 128, 256, 512)):
            layers += [_BasicBlock(c, width, 1 if i == 0 else 2), _BasicBlock(width, width, 1)]
            c = width
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, num_classes)]
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _RepeatChannels(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.expand(-1, self.channels, -1, -1) if x.shape[1] != self.channels else x


def _space_arch(spec: str, channels: int, input_size: int, num_classes: int) -> nn.Module:
    from nasutil.registry import get_space

    name, arch = spec.split(":", 1)
    space = get_space(name)
    if channels not in (1, space.in_channels):
        raise NasutilError(f"space {name!r} takes {space.in_channels}-channel images, the data has {channels}")
    model = space.build(space.parse(arch), num_classes=num_classes, input_size=input_size)
    return nn.Sequential(_RepeatChannels(space.in_channels), model) if channels != space.in_channels else model
