"""A MobileNetV2/V3-style macro search space of inverted-residual (MBConv) stages.

The network is MobileNetV2's skeleton (Sandler et al., CVPR 2018): a fixed 3x3
stem with 32 channels, 7 stages of inverted residual blocks with base channels
16, 24, 32, 64, 96, 160, 320 and strides 1, 2, 2, 2, 1, 2, 1, then a 1x1 conv
head (1280 channels, more when the last stage is widened), global average
pooling and a linear classifier.

Each stage chooses its kernel size {3, 5, 7}, expansion ratio {1, 3, 4, 6},
depth {1, 2, 3, 4}, width multiplier {0.5, 0.75, 1.0, 1.25, 1.5} and whether its
blocks carry squeeze-excite. The first stage keeps MobileNetV2's expansion 1
(its depthwise conv runs straight on the stem's output); its other choices are
free. The space deliberately spans narrow, depthwise-heavy networks (small
kernels, low expansion, half width: many tiny kernels that leave a GPU idle) up
to wide, dense-ish ones (expansion 6, width 1.5: big 1x1 convolutions that keep
it busy), so that utilization varies as much as accuracy.

Fixed rules, each in one place:
  * resolution (`resolution_plan`): at inputs of at most 64 pixels the stem has
    stride 1 and the first two downsampling stages (24 and 32 channels) stride 1,
    as in common CIFAR adaptations, so a 32x32 image reaches the head at 8x8;
    larger inputs keep MobileNetV2's strides (224 -> 7).
  * activation (`activation_name`): ReLU6 in the stem and stages 1-3 (high
    resolution, where Hardswish costs most), Hardswish in stages 4-7 and the head,
    as in MobileNetV3.
  * widths (`stage_channels`, `head_channels`): base x multiplier rounded with
    `make_divisible(., 8)`; the head is 1280 x max(1, last stage's multiplier).

String form: 7 stage tokens joined by '-', each `k<kernel>e<expansion>d<depth>w<width>se<0|1>`,
e.g. `k3e1d1w1.0se0-k3e6d2w1.0se0-k5e6d3w0.75se1-k3e6d4w1.0se0-k5e6d3w1.0se1-k5e6d3w1.25se1-k3e6d1w1.0se0`.

Encoding: 5 numbers per stage (35 in all), each scaled to [0, 1] in its
choice range (kernel, expansion, depth, width) or 0/1 (SE). Numbers rather than
one-hot because every choice is ordinal and a predictor should see that.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from nasutil.ops import Op
from nasutil.lazy_imports import lazy_attributes
from nasutil.space import SearchSpace
from nasutil_search_spaces.mbconv_arch import (  # noqa: F401 (this module is their face)
    activation_name, BASE_CHANNELS, BASE_STRIDES, _block_ops, _conv_bn_act, DEPTHS, EXPANSIONS, FIELDS_PER_STAGE,
    FIRST_HARDSWISH_STAGE, HEAD_ACTIVATION, HEAD_CHANNELS, head_channels, KERNELS, make_divisible, MBConvArch,
    NUM_STAGES, parse_arch, resolution_plan, SE_CHOICES, SMALL_INPUT_MAX, stage_channels, STAGE_EXPANSIONS,
    StageConfig, STEM_CHANNELS, WIDTHS,
)

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

# The torch modules live in `mbconv_network`; these names still resolve here, importing torch on first use.
NETWORK_NAMES = ("stage_activation", "ConvBNAct", "SqueezeExcite", "InvertedResidual", "MBConvNetwork")
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(NETWORK_NAMES, "nasutil_search_spaces.mbconv_network"))


class MBConvSpace(SearchSpace[MBConvArch]):
    name = "mbconv"
    description = ("MobileNetV2/V3-style macro space: 7 MBConv stages x (kernel, expansion, depth, width, SE), "
                   "depthwise-narrow to wide-dense")
    default_input_size = 224

    def sample(self, rng: np.random.Generator) -> MBConvArch:
        def pick(choices: tuple):
            return choices[int(rng.integers(len(choices)))]

        return MBConvArch(tuple(
            StageConfig(pick(KERNELS), pick(STAGE_EXPANSIONS[i]), pick(DEPTHS), pick(WIDTHS), pick(SE_CHOICES))
            for i in range(NUM_STAGES)))

    def suggest(self, trial: optuna.Trial) -> MBConvArch:
        stages = []
        for i in range(NUM_STAGES):
            p = f"stage{i + 1}_"
            expansions = STAGE_EXPANSIONS[i]
            # A fixed choice is no decision: no parameter for it.
            expansion = expansions[0] if len(expansions) == 1 else trial.suggest_categorical(p + "expansion", expansions)
            stages.append(StageConfig(
                kernel=trial.suggest_categorical(p + "kernel", KERNELS),
                expansion=expansion,
                depth=trial.suggest_categorical(p + "depth", DEPTHS),
                width=trial.suggest_categorical(p + "width", WIDTHS),
                se=trial.suggest_categorical(p + "se", SE_CHOICES),
            ))
        return MBConvArch(tuple(stages))

    def parse(self, text: str) -> MBConvArch:
        return parse_arch(text)

    def build(self, arch: MBConvArch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        num_classes = self.check_num_classes(num_classes)
        size = self.default_input_size if input_size is None else input_size
        if size < 1:
            raise ValueError(f"input_size must be positive, got {size}")
        from nasutil_search_spaces.mbconv_network import MBConvNetwork

        return MBConvNetwork(arch, num_classes=num_classes, input_size=size, in_channels=self.in_channels)

    def operators(self, arch: MBConvArch, num_classes: int = 10, input_size: int | None = None) -> list[Op]:
        """`MBConvNetwork`'s ops, listed without building it (equal to tracing it; tested)."""
        size = self.default_input_size if input_size is None else input_size
        stem_stride, strides = resolution_plan(size)
        ops, size = _conv_bn_act(self.in_channels, STEM_CHANNELS, size, 3, stem_stride, 1, activation_name(0))
        c = STEM_CHANNELS
        for i, (stage, stride) in enumerate(zip(arch.stages, strides)):
            c_out = stage_channels(i, stage.width)
            for b in range(stage.depth):
                block, size = _block_ops(c, c_out, size, stage, stride if b == 0 else 1, activation_name(i))
                ops += block
                c = c_out
        head = head_channels(arch.stages[-1].width)
        block, size = _conv_bn_act(c, head, size, 1, 1, 1, HEAD_ACTIVATION)
        return ops + block + [Op("gpool", head, size, size, head, 1, 1, variant="avg"),
                              Op("linear", head, 1, 1, num_classes, 1, 1, bias=True)]

    @property
    def encoding_size(self) -> int:
        return NUM_STAGES * FIELDS_PER_STAGE

    def size(self) -> int:
        return math.prod(len(KERNELS) * len(STAGE_EXPANSIONS[i]) * len(DEPTHS) * len(WIDTHS) * len(SE_CHOICES)
                         for i in range(NUM_STAGES))
