"""The MBConv network as torch modules.

They live apart from `mbconv` so that the space (parsing, sampling, encoding,
op listing) loads without torch; `MBConvSpace.build` imports this module. The
fixed rules of the network (strides, widths, activations) stay in `mbconv`.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from nasutil_search_spaces.mbconv_arch import (
    HEAD_ACTIVATION, STEM_CHANNELS, MBConvArch, activation_name, head_channels, make_divisible, resolution_plan,
    stage_channels,
)

_ACTIVATIONS: dict[str, type[nn.Module]] = {"relu6": nn.ReLU6, "hardswish": nn.Hardswish}


def stage_activation(index: int) -> type[nn.Module]:
    """The activation module of stage `index` (0-based), by the rule of `mbconv.activation_name`."""
    return _ACTIVATIONS[activation_name(index)]


class ConvBNAct(nn.Sequential):
    """Conv (no bias) -> BatchNorm -> optional activation, with 'same' padding."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1,
                 act: type[nn.Module] | None = None) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(c_out),
        ]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """Channel gating of MobileNetV3: pool, reduce to 1/4, ReLU, expand, hardsigmoid."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = make_divisible(channels / 4, 8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.reduce = nn.Conv2d(channels, squeezed, 1)
        self.act = nn.ReLU()
        self.expand = nn.Conv2d(squeezed, channels, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.gate(self.expand(self.act(self.reduce(self.pool(x)))))


class InvertedResidual(nn.Module):
    """1x1 expand (skipped at ratio 1) -> kxk depthwise -> optional SE -> 1x1 linear projection."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int, expansion: int, se: bool,
                 act: type[nn.Module]) -> None:
        super().__init__()
        hidden = c_in * expansion
        self.expand = ConvBNAct(c_in, hidden, 1, act=act) if expansion != 1 else nn.Identity()
        self.depthwise = ConvBNAct(hidden, hidden, kernel, stride=stride, groups=hidden, act=act)
        self.se = SqueezeExcite(hidden) if se else nn.Identity()
        self.project = ConvBNAct(hidden, c_out, 1)
        self.use_residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.project(self.se(self.depthwise(self.expand(x))))
        return x + out if self.use_residual else out


class MBConvNetwork(nn.Module):
    def __init__(self, arch: MBConvArch, num_classes: int = 10, input_size: int = 224, in_channels: int = 3) -> None:
        super().__init__()
        stem_stride, strides = resolution_plan(input_size)
        self.stem = ConvBNAct(in_channels, STEM_CHANNELS, 3, stride=stem_stride, act=stage_activation(0))
        c = STEM_CHANNELS
        stages: list[nn.Module] = []
        for i, (stage, stride) in enumerate(zip(arch.stages, strides)):
            c_out = stage_channels(i, stage.width)
            blocks = []
            for b in range(stage.depth):
                blocks.append(InvertedResidual(c, c_out, stage.kernel, stride if b == 0 else 1, stage.expansion,
                                               stage.se, stage_activation(i)))
                c = c_out
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.Sequential(*stages)
        head = head_channels(arch.stages[-1].width)
        self.head = ConvBNAct(c, head, 1, act=_ACTIVATIONS[HEAD_ACTIVATION])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(head, num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.zeros_(m.bias)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The head's feature map, before pooling."""
        return self.head(self.stages(self.stem(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))
