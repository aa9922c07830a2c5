"""NAS-Bench-201 cells without torch: the ops, the edges, the arch and its string, and the ops of the network
around a cell, shared by the space and its torch network."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError
from nasutil.ops import Op, conv_out


OPS: tuple[str, ...] = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
NUM_NODES = 4
#: edges (to, from) in the order of the cell string
EDGES: tuple[tuple[int, int], ...] = tuple((i, j) for i in range(1, NUM_NODES) for j in range(i))
_TOKEN = re.compile(r"^([A-Za-z0-9_.-]+)~(\d+)$")


@dataclass(frozen=True)
class NB201Arch(Arch):
    """One cell: the op on each of the 6 edges, in `EDGES` order."""

    ops: tuple[str, ...]
    space = "nb201"

    def to_string(self) -> str:
        return cell_string(self.ops, NUM_NODES - 1)

    def encode(self) -> np.ndarray:
        vec = np.zeros((len(EDGES), len(OPS)), dtype=np.float32)
        for e, op in enumerate(self.ops):
            vec[e, OPS.index(op)] = 1.0
        return vec.ravel()

    def edge(self, to: int, frm: int) -> str:
        return self.ops[EDGES.index((to, frm))]


def cell_string(ops: tuple[str, ...], nodes: int) -> str:
    """`|op~0|+|op~0|op~1|+...`: node i's incoming edges from nodes 0..i-1, nodes joined by '+'."""
    parts, k = [], 0
    for i in range(1, nodes + 1):
        parts.append("|" + "|".join(f"{ops[k + j]}~{j}" for j in range(i)) + "|")
        k += i
    return "+".join(parts)


def parse_cell_string(text: str, nodes: int, ops: tuple[str, ...], what: str) -> tuple[str, ...]:
    """The edge ops of a `cell_string` of `nodes` nodes over `ops`, with a precise reason on failure
    (`what` names the space in the messages)."""
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        raise InvalidArchError(f"empty {what} cell string")
    parts = text.split("+")
    if len(parts) != nodes:
        raise InvalidArchError(f"{what} cell needs {nodes} nodes separated by '+', got {len(parts)} in {text!r}")
    found: list[str] = []
    for i, node in enumerate(parts, start=1):
        if not (node.startswith("|") and node.endswith("|")) or len(node) < 2:
            raise InvalidArchError(f"node {i} of {text!r} must look like |op~0|...|, got {node!r}")
        tokens = node[1:-1].split("|")
        if len(tokens) != i:
            raise InvalidArchError(f"node {i} needs {i} incoming edge(s), got {len(tokens)} in {node!r}")
        for j, token in enumerate(tokens):
            m = _TOKEN.match(token)
            if not m:
                raise InvalidArchError(f"malformed edge {token!r} in node {i} (expected op~input)")
            op, src = m.group(1), int(m.group(2))
            if op not in ops:
                raise InvalidArchError(f"unknown op {op!r} for {what} cells (ops: {', '.join(ops)})")
            if src != j:
                raise InvalidArchError(f"edge {token!r} of node {i} must come from node {j}, not {src}")
            found.append(op)
    return tuple(found)


def parse_cell(text: str) -> NB201Arch:
    """Parse `|op~0|+|op~0|op~1|+|op~0|op~1|op~2|` with a precise reason on failure."""
    return NB201Arch(parse_cell_string(text, NUM_NODES - 1, OPS, "NAS-Bench-201"))


def _conv(c_in: int, c_out: int, size: int, kernel: int, stride: int) -> Op:
    out = conv_out(size, kernel, stride, kernel // 2)
    return Op("conv", c_in, size, size, c_out, out, out, kernel=kernel, stride=stride)


def _norm(c: int, size: int) -> Op:
    return Op("norm", c, size, size, c, size, size, bias=True)


def _map(family: str, c: int, size: int, variant: str = "") -> Op:
    return Op(family, c, size, size, c, size, size, variant=variant)


def relu_conv_bn_ops(c_in: int, c_out: int, size: int, kernel: int, stride: int) -> list[Op]:
    """ReLU, convolution (padding kernel // 2), BatchNorm: the ops of `ReLUConvBN`."""
    conv = _conv(c_in, c_out, size, kernel, stride)
    return [_map("act", c_in, size, "relu"), conv, _norm(c_out, conv.h_out)]


def _reduction(c_in: int, c_out: int, size: int) -> list[Op]:
    half = conv_out(size, 3, 2, 1)
    return (relu_conv_bn_ops(c_in, c_out, size, 3, 2) + relu_conv_bn_ops(c_out, c_out, half, 3, 1)
            + [Op("pool", c_in, size, size, c_in, half, half, kernel=2, stride=2, variant="avg"),  # rounds up
               _conv(c_in, c_out, half, 1, 1), _map("add", c_out, half)])


def _cell_ops(arch: NB201Arch, c: int, size: int) -> list[Op]:
    ops: list[Op] = []
    for (i, j), op in zip(EDGES, arch.ops):
        if op == "none":
            ops.append(_map("scale", c, size, "zero"))
        elif op == "nor_conv_1x1":
            ops += relu_conv_bn_ops(c, c, size, 1, 1)
        elif op == "nor_conv_3x3":
            ops += relu_conv_bn_ops(c, c, size, 3, 1)
        elif op == "avg_pool_3x3":
            ops.append(Op("pool", c, size, size, c, size, size, kernel=3, stride=1, variant="avg"))
        # node i sums its i inputs starting from Python's 0: one `0 + x`, then i - 1 additions
        ops.append(_map("scale", c, size, "add") if j == 0 else _map("add", c, size))
    return ops


def network_ops(cell_ops: Callable[[int, int], list[Op]], in_channels: int, channels: int, stages: int,
                cells_per_stage: int, size: int, num_classes: int) -> list[Op]:
    """The ops of NAS-Bench-201's network around its cells: a 3x3 conv stem, stages of cells (`cell_ops(C,
    resolution)`) joined by the residual reduction block, BN + ReLU, global pooling, the classifier."""
    c = channels
    ops = [_conv(in_channels, c, size, 3, 1), _norm(c, size)]
    for stage in range(stages):
        if stage > 0:
            ops += _reduction(c, 2 * c, size)
            c, size = 2 * c, conv_out(size, 3, 2, 1)
        ops += cell_ops(c, size) * cells_per_stage
    return ops + [_norm(c, size), _map("act", c, size, "relu"), Op("gpool", c, size, size, c, 1, 1, variant="avg"),
                  Op("linear", c, 1, 1, num_classes, 1, 1, bias=True)]
