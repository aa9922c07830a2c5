"""Operator lists: a network as the kernels it launches, for the predictors.

An `Op` is one operator of a forward pass of a single image: a convolution,
normalisation, activation, pooling, linear layer, or an element-wise op written in
a module's `forward` (a residual addition, a squeeze-excite gate, the `0 + x` that
Python's `sum` starts with). Ops are plain frozen values, so identical ops in
different networks compare and hash equal: an operator-level device profile
measures each distinct op once.

Two ways to get a network's ops: `nasutil.op_tracing.trace_ops` runs the network once
on the CPU with hooks on its leaf modules and a dispatch mode for the element-wise ops
between them (any network); a search space that knows its own structure can list them
directly (`SearchSpace.operators`), which costs well under a millisecond and needs no
torch: this module imports none, so predicting from a listing starts fast. FLOPs follow
`torch.utils.flop_counter`: a multiply-add is 2, everything but convolutions and
matrix products is 0, so `network_flops(ops)` equals `count_model`'s total.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass

#: families that launch work on the device; `Op.family` is one of these
FAMILIES = ("conv", "dwconv", "gconv", "linear", "norm", "act", "pool", "gpool", "add", "mul", "scale", "cat",
            "other")


@dataclass(frozen=True, order=True)
class Op:
    """One operator for one image: input C x H x W, output C x H x W, and its configuration."""

    family: str
    c_in: int
    h_in: int
    w_in: int
    c_out: int
    h_out: int
    w_out: int
    kernel: int = 1
    stride: int = 1
    groups: int = 1
    bias: bool = False
    variant: str = ""  # activation or pooling type, "broadcast" for a gating multiply, ...
    dilation: int = 1  # a convolution's: same work, another kernel (DARTS's dilated convs run far slower)

    @property
    def flops(self) -> int:
        if self.family in ("conv", "dwconv", "gconv"):
            return 2 * self.c_out * self.h_out * self.w_out * (self.c_in // self.groups) * self.kernel ** 2
        if self.family == "linear":
            return 2 * self.c_in * self.c_out
        return 0

    @property
    def params(self) -> int:
        if self.family in ("conv", "dwconv", "gconv"):
            return self.c_out * (self.c_in // self.groups) * self.kernel ** 2 + (self.c_out if self.bias else 0)
        if self.family == "linear":
            return self.c_in * self.c_out + (self.c_out if self.bias else 0)
        if self.family == "norm":
            return 2 * self.c_out if self.bias else 0  # affine weight and bias
        return 0

    @property
    def input_elems(self) -> int:
        single = self.c_in * self.h_in * self.w_in
        if self.family == "add":
            return 2 * single
        if self.family == "mul":
            return single + (self.c_in if self.variant == "broadcast" else single)
        return single

    @property
    def output_elems(self) -> int:
        return self.c_out * self.h_out * self.w_out

    def bytes(self, batch: int, elem_size: int) -> int:
        """Activations in and out for `batch` images plus the weights read once."""
        return ((self.input_elems + self.output_elems) * batch + self.params) * elem_size

    @property
    def reach(self) -> int:
        """The kernel's extent on the input: dilation spreads its taps."""
        return self.dilation * (self.kernel - 1) + 1

    def to_dict(self) -> dict:
        data = asdict(self)
        if self.dilation == 1:
            del data["dilation"]  # most ops: keep profiles as they were
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Op:
        return cls(family=str(data["family"]), c_in=int(data["c_in"]), h_in=int(data["h_in"]),
                   w_in=int(data["w_in"]), c_out=int(data["c_out"]), h_out=int(data["h_out"]),
                   w_out=int(data["w_out"]), kernel=int(data.get("kernel", 1)), stride=int(data.get("stride", 1)),
                   groups=int(data.get("groups", 1)), bias=bool(data.get("bias", False)),
                   variant=str(data.get("variant", "")), dilation=int(data.get("dilation", 1)))


def conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def network_flops(ops: Iterable[Op]) -> int:
    return sum(op.flops for op in ops)


def network_params(ops: Iterable[Op]) -> int:
    return sum(op.params for op in ops)
