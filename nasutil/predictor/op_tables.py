"""Operator-level predictor: measured op latencies, summed, with a model of what the mode overlaps.

The kernel-level approach of nn-Meter, for a GPU: a device profile holds the measured
latency of every distinct op (convolution of each kernel size, stride and shape,
depthwise and pointwise convolutions, pooling, linear, normalisation, activations,
element-wise ops) at a (dtype, batch, mode). A network's latency is

    latency = scale * sum(op latencies) + per_op_us * ops + offset_us

where the three constants, fitted on a few measured networks, stand for what the
execution mode does between ops: the Python and launch work of an eager forward
beyond its leaf calls, the gaps and overlap of kernels replayed from a CUDA graph.
A table holds one set fitted on every space's networks and, where a space's own
networks were measured, a set for that space (its forward's Python differs).

An op the profile never measured is predicted from its nearest measured neighbours of
the same kind (log channels and log spatial size): their ratio of measured time to the
analytical roofline time is carried over to the new op's roofline time, so the
prediction scales with the op's work instead of copying a neighbour's time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nasutil.devices import lookup
from nasutil.errors import NasutilError
from nasutil.evaluator.dtypes import element_size
from nasutil.ops import Op
from nasutil.predictor.analytical import KernelModel, op_time_us
from nasutil.predictor.prediction import PredictTarget

NEIGHBOURS = 4


@dataclass(frozen=True)
class Overlap:
    """latency = scale * sum(op latencies) + per_op_us * ops + offset_us, fitted on `calibrated_on` networks."""

    scale: float = 1.0
    per_op_us: float = 0.0
    offset_us: float = 0.0
    calibrated_on: int = 0


@dataclass
class OperatorTable:
    """Measured op latencies (microseconds) at one (dtype, batch, mode), and the overlap constants."""

    dtype: str
    batch_size: int
    mode: str
    times_us: dict[Op, float] = field(default_factory=dict)
    shared: Overlap = field(default_factory=lambda: Overlap())
    by_space: dict[str, Overlap] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.dtype}/{self.batch_size}/{self.mode}"

    def overlap(self, space: str = "") -> Overlap:
        return self.by_space.get(space) or self.shared


class OpTableModel:
    """A network's latency from a profile's operator tables (see the module docstring)."""

    def __init__(self, tables: list[OperatorTable]) -> None:
        self.tables = {t.key: t for t in tables}
        self._memo: dict[tuple[str, Op], float] = {}
        self._groups: dict[tuple[str, tuple], tuple[np.ndarray, np.ndarray]] = {}

    def table_for(self, target: PredictTarget) -> OperatorTable:
        table = self.tables.get(target.key)
        if table is None:
            known = ", ".join(sorted(self.tables)) or "none"
            raise NasutilError(f"the profile has no operator table for {target.key} (has: {known})")
        return table

    def op_us(self, op: Op, target: PredictTarget) -> float:
        key = (target.key, op)
        value = self._memo.get(key)
        if value is None:
            table = self.table_for(target)
            value = table.times_us.get(op)
            if value is None:
                value = self._interpolate(op, table, target)
            self._memo[key] = value
        return value

    def sum_us(self, ops: list[Op], target: PredictTarget) -> float:
        return sum(self.op_us(op, target) for op in ops)

    def predict_latency_ms(self, ops: list[Op], target: PredictTarget, space: str = "") -> float:
        """With `space`, the overlap constants fitted on that space's networks where the table has them."""
        overlap = self.table_for(target).overlap(space)
        total = overlap.scale * self.sum_us(ops, target) + overlap.per_op_us * len(ops) + overlap.offset_us
        return max(total, 1e-3) / 1e3

    # ---- ops the profile has not measured ----

    def _interpolate(self, op: Op, table: OperatorTable, target: PredictTarget) -> float:
        roof = _roofline_us(op, target)
        for group in (_group_key(op), (op.family,), None):
            z, log_ratio = self._group(table, target, group)
            if len(z):
                break
        else:
            return roof
        distance = np.sqrt(((z - _position(op)) ** 2).sum(axis=1))
        nearest = np.argsort(distance)[:NEIGHBOURS]
        weights = 1.0 / (distance[nearest] + 1e-3)
        return roof * math.exp(float((weights * log_ratio[nearest]).sum() / weights.sum()))

    def _group(self, table: OperatorTable, target: PredictTarget, group: tuple | None):
        key = (table.key, group)
        if key not in self._groups:
            members = [(op, t) for op, t in table.times_us.items()
                       if group is None or _group_key(op)[: len(group)] == group]
            z = np.array([_position(op) for op, _ in members]).reshape(len(members), 3)
            ratios = np.array([math.log(t / _roofline_us(op, target)) for op, t in members])
            self._groups[key] = (z, ratios)
        return self._groups[key]


def _group_key(op: Op) -> tuple:
    return (op.family, op.kernel, op.stride, op.variant, op.dilation)


def op_kind(op: Op) -> str:
    """A kind of op as the tables group them for interpolation: family, kernel, stride, variant, dilation."""
    return (f"{op.family} {op.kernel}x{op.kernel}/{op.stride}" + (f" {op.variant}" if op.variant else "")
            + (f" dilation {op.dilation}" if op.dilation != 1 else ""))


def _position(op: Op) -> np.ndarray:
    return np.log([op.c_in, op.c_out, op.h_in * op.w_in])


_ROOF_MODEL = KernelModel()


def _roofline_us(op: Op, target: PredictTarget) -> float:
    spec = lookup(target.device_name)
    if spec is None or spec.peak(target.dtype) is None:
        return 1.0 + op.bytes(target.batch_size, element_size(target.dtype)) / 1e6  # bytes still order the ops
    return op_time_us(op, target, _ROOF_MODEL)


def fit_overlap(table: OperatorTable, predictor: OpTableModel, target: PredictTarget,
                networks: list[tuple[list[Op], float]], space: str = "") -> OperatorTable:
    """Fit scale, per-op and offset constants to measured network latencies (ms), on relative error:
    the table's shared constants, or with `space` that space's own."""
    from scipy.optimize import lsq_linear

    if len(networks) < 3:
        return table
    sums = np.array([predictor.sum_us(ops, target) for ops, _ in networks])
    counts = np.array([len(ops) for ops, _ in networks], dtype=np.float64)
    measured = np.array([latency * 1e3 for _, latency in networks])
    design = np.stack([sums / measured, counts / measured, 1.0 / measured], axis=1)
    fit = lsq_linear(design, np.ones(len(networks)), bounds=([0.2, -50.0, -1e5], [5.0, 50.0, 1e5]))
    overlap = Overlap(*(float(v) for v in fit.x), calibrated_on=len(networks))
    if space:
        table.by_space[space] = overlap
    else:
        table.shared = overlap
    return table
