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
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError
from nasutil.ops import Op, conv_out
from nasutil.lazy_imports import lazy_attributes
from nasutil.space import SearchSpace

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

NUM_STAGES = 7
BASE_CHANNELS: tuple[int, ...] = (16, 24, 32, 64, 96, 160, 320)
BASE_STRIDES: tuple[int, ...] = (1, 2, 2, 2, 1, 2, 1)
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280
#: inputs at most this many pixels wide get the small-image strides (see `resolution_plan`)
SMALL_INPUT_MAX = 64

KERNELS: tuple[int, ...] = (3, 5, 7)
EXPANSIONS: tuple[int, ...] = (1, 3, 4, 6)
DEPTHS: tuple[int, ...] = (1, 2, 3, 4)
WIDTHS: tuple[float, ...] = (0.5, 0.75, 1.0, 1.25, 1.5)
SE_CHOICES: tuple[bool, ...] = (False, True)
#: expansion ratios allowed per stage: the first stage keeps MobileNetV2's 1
STAGE_EXPANSIONS: tuple[tuple[int, ...], ...] = ((1,),) + (EXPANSIONS,) * (NUM_STAGES - 1)
#: stages (0-based) from which on blocks use Hardswish instead of ReLU6
FIRST_HARDSWISH_STAGE = 3
#: the activation of the 1x1 conv head
HEAD_ACTIVATION = "hardswish"

FIELDS_PER_STAGE = 5
_TOKEN = re.compile(r"^k(\d+)e(\d+)d(\d+)w(\d+(?:\.\d+)?)se(\d+)$")

# The torch modules live in `mbconv_network`; these names still resolve here, importing torch on first use.
NETWORK_NAMES = ("stage_activation", "ConvBNAct", "SqueezeExcite", "InvertedResidual", "MBConvNetwork")
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(NETWORK_NAMES, "nasutil_search_spaces.mbconv_network"))


@dataclass(frozen=True)
class StageConfig:
    """The choices of one stage; its blocks all share them."""

    kernel: int
    expansion: int
    depth: int
    width: float
    se: bool

    def to_string(self) -> str:
        return f"k{self.kernel}e{self.expansion}d{self.depth}w{self.width}se{int(self.se)}"


def _check_stage(index: int, stage: StageConfig) -> StageConfig:
    """Validate stage `index` (0-based) and return it with plain int/float/bool fields."""
    where = f"stage {index + 1}"
    checks = (("kernel size", stage.kernel, KERNELS), ("expansion ratio", stage.expansion, STAGE_EXPANSIONS[index]),
              ("depth", stage.depth, DEPTHS), ("width multiplier", stage.width, WIDTHS), ("se flag", stage.se, (0, 1)))
    for label, value, choices in checks:
        if isinstance(value, (str, bool)) and label != "se flag" or value not in choices:
            allowed = ", ".join(str(c) for c in choices)
            raise InvalidArchError(f"{where}: unknown {label} {value!r} (choices: {allowed})")
    return StageConfig(int(stage.kernel), int(stage.expansion), int(stage.depth), float(stage.width), bool(stage.se))


@dataclass(frozen=True)
class MBConvArch(Arch):
    """Seven `StageConfig`s, first to last. Invalid choices raise `InvalidArchError` on construction."""

    stages: tuple[StageConfig, ...]
    space = "mbconv"

    def __post_init__(self) -> None:
        stages = tuple(self.stages)
        if len(stages) != NUM_STAGES:
            raise InvalidArchError(f"MBConv arch needs {NUM_STAGES} stages, got {len(stages)}")
        # Normalised so that equal archs print equally (e.g. width 1 and 1.0).
        object.__setattr__(self, "stages", tuple(_check_stage(i, s) for i, s in enumerate(stages)))

    @classmethod
    def uniform(cls, kernel: int = 3, expansion: int = 6, depth: int = 1, width: float = 1.0,
                se: bool = False) -> MBConvArch:
        """The same choices in every stage (the first stage keeps expansion 1)."""
        return cls(tuple(StageConfig(kernel, expansion if i else 1, depth, width, se) for i in range(NUM_STAGES)))

    def to_string(self) -> str:
        return "-".join(s.to_string() for s in self.stages)

    def encode(self) -> np.ndarray:
        def scale(value: float, choices: tuple) -> float:
            return (value - min(choices)) / (max(choices) - min(choices))

        rows = [(scale(s.kernel, KERNELS), scale(s.expansion, EXPANSIONS), scale(s.depth, DEPTHS),
                 scale(s.width, WIDTHS), float(s.se)) for s in self.stages]
        return np.asarray(rows, dtype=np.float32).ravel()


def parse_arch(text: str) -> MBConvArch:
    """Parse `k3e1d1w1.0se0-...` (7 tokens) with a one-line reason on failure."""
    if not isinstance(text, str):
        raise InvalidArchError(f"MBConv arch must be a string, got {type(text).__name__}")
    text = text.strip()
    if not text:
        raise InvalidArchError("empty MBConv arch string")
    tokens = text.split("-")
    if len(tokens) != NUM_STAGES:
        raise InvalidArchError(f"MBConv arch needs {NUM_STAGES} stage tokens joined by '-', got {len(tokens)} "
                               f"in {text!r}")
    stages = []
    for i, token in enumerate(tokens):
        m = _TOKEN.match(token)
        if not m:
            raise InvalidArchError(f"stage {i + 1}: malformed token {token!r} (expected like k3e6d2w1.0se0)")
        k, e, d, w, se = m.groups()
        stages.append(StageConfig(int(k), int(e), int(d), float(w), int(se)))
    return MBConvArch(tuple(stages))  # validates each stage's choices


# ---- fixed rules of the network ----

def resolution_plan(input_size: int) -> tuple[int, tuple[int, ...]]:
    """(stem stride, per-stage strides). Small inputs drop the stem's and the first two stages' downsampling."""
    if input_size > SMALL_INPUT_MAX:
        return 2, BASE_STRIDES
    strides, dropped = [], 0
    for s in BASE_STRIDES:
        if s == 2 and dropped < 2:
            s, dropped = 1, dropped + 1
        strides.append(s)
    return 1, tuple(strides)


def activation_name(index: int) -> str:
    """ReLU6 at high resolution (stages 1-3), Hardswish deeper, as in MobileNetV3 (lower-case op names)."""
    return "relu6" if index < FIRST_HARDSWISH_STAGE else "hardswish"


def make_divisible(value: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round a channel count to a multiple of `divisor`, never dropping more than 10%."""
    min_value = min_value or divisor
    new = max(min_value, int(value + divisor / 2) // divisor * divisor)
    if new < 0.9 * value:
        new += divisor
    return new


def stage_channels(index: int, width: float) -> int:
    return make_divisible(BASE_CHANNELS[index] * width, 8)


def head_channels(last_width: float) -> int:
    """1280 at width <= 1, scaled up with wider last stages (MobileNetV2's rule)."""
    return make_divisible(HEAD_CHANNELS * max(1.0, last_width), 8)


# ---- op listing ----

def _conv_bn_act(c_in: int, c_out: int, size: int, kernel: int, stride: int, groups: int,
                 act: str | None) -> tuple[list[Op], int]:
    out = conv_out(size, kernel, stride, kernel // 2)
    family = "conv" if groups == 1 else "dwconv"
    ops = [Op(family, c_in, size, size, c_out, out, out, kernel=kernel, stride=stride, groups=groups),
           Op("norm", c_out, out, out, c_out, out, out, bias=True)]
    if act is not None:
        ops.append(Op("act", c_out, out, out, c_out, out, out, variant=act))
    return ops, out


def _block_ops(c_in: int, c_out: int, size: int, stage: StageConfig, stride: int,
               act: str) -> tuple[list[Op], int]:
    hidden = c_in * stage.expansion
    ops: list[Op] = []
    if stage.expansion != 1:
        ops += _conv_bn_act(c_in, hidden, size, 1, 1, 1, act)[0]
    depthwise, out = _conv_bn_act(hidden, hidden, size, stage.kernel, stride, hidden, act)
    ops += depthwise
    if stage.se:
        squeezed = make_divisible(hidden / 4, 8)
        ops += [Op("gpool", hidden, out, out, hidden, 1, 1, variant="avg"),
                Op("conv", hidden, 1, 1, squeezed, 1, 1, bias=True),
                Op("act", squeezed, 1, 1, squeezed, 1, 1, variant="relu"),
                Op("conv", squeezed, 1, 1, hidden, 1, 1, bias=True),
                Op("act", hidden, 1, 1, hidden, 1, 1, variant="hardsigmoid"),
                Op("mul", hidden, out, out, hidden, out, out, variant="broadcast")]
    ops += _conv_bn_act(hidden, c_out, out, 1, 1, 1, None)[0]
    if stride == 1 and c_in == c_out:
        ops.append(Op("add", c_out, out, out, c_out, out, out))
    return ops, out


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
