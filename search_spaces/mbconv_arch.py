"""MobileNet-style (MBConv) networks without torch: the choices, the arch and its string, and the channel and
resolution plan, shared by the space and its torch network."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError
from nasutil.ops import Op, conv_out


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
