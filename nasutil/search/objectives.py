"""The study's objectives and constraints, from the figures a trial gathered."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nasutil.errors import NasutilError
from nasutil.search.config import refuse_unknown_keys


@dataclass(frozen=True)
class Metric:
    name: str
    direction: str  # "maximize" or "minimize"
    key: str  # the trial record field it reads
    label: str  # axis label
    worst: float  # reported for a trial that never got this figure (a pruned trial's accuracy)


METRICS: dict[str, Metric] = {m.name: m for m in (
    Metric("accuracy", "maximize", "accuracy", "accuracy (%)", 0.0),
    Metric("throughput", "maximize", "throughput_per_s", "throughput (images/s)", 0.0),
    Metric("latency", "minimize", "latency_ms", "latency per batch (ms)", math.inf),
    Metric("utilization", "maximize", "utilization", "utilization (fraction of peak)", 0.0),
    Metric("params", "minimize", "params", "parameters", math.inf),
    Metric("flops", "minimize", "flops_per_image", "FLOPs per image", math.inf),
)}


#: `objectives.scored_on`: score trained trials on measured figures (a trial that cannot be measured fails),
#: on predicted ones (measurements, where taken, are recorded beside them), or on measured where measured,
#: else predicted (a trained candidate the evaluator holds no figure for keeps its prediction)
HARDWARE_SOURCES = ("auto", "measured", "predicted")
#: the settings of the `objectives` group (`name` labels the option)
SETTINGS = ("name", "metrics", "latency_slo_ms", "min_accuracy", "scored_on")


@dataclass(frozen=True)
class Objectives:
    """Metrics in study order, plus constraints a feasible trial must meet (<= 0 is feasible)."""

    metrics: tuple[Metric, ...]
    latency_slo_ms: float | None = None
    min_accuracy: float | None = None
    scored_on: str = "auto"  # a trained trial's hardware figures: measured, predicted, or auto (measured where measured)

    @classmethod
    def from_config(cls, cfg: dict[str, Any]) -> Objectives:
        refuse_unknown_keys(cfg, "objectives", SETTINGS)
        given = cfg.get("metrics") or []
        if not isinstance(given, (list, tuple)):  # a bare name would be read letter by letter
            raise NasutilError(f"objectives.metrics must be a list, e.g. [accuracy,throughput], got {given!r}")
        names = list(given)
        if not names:
            raise NasutilError("objectives.metrics is empty (e.g. [accuracy, throughput])")
        unknown = [n for n in names if n not in METRICS]
        if unknown:
            raise NasutilError(f"unknown objective {unknown[0]!r} (choose from {', '.join(METRICS)})")
        if len(set(names)) != len(names):
            raise NasutilError(f"objectives.metrics repeats a metric: {names}")
        slo = _number(cfg.get("latency_slo_ms"), "objectives.latency_slo_ms")
        floor = _number(cfg.get("min_accuracy"), "objectives.min_accuracy")
        if slo is not None and not slo > 0:
            raise NasutilError(f"objectives.latency_slo_ms must be positive, got {slo}")
        if floor is not None and not 0 <= floor <= 100:
            raise NasutilError(f"objectives.min_accuracy is a percentage in [0, 100], got {floor}")
        scored_on = str(cfg.get("scored_on", "auto"))
        if scored_on not in HARDWARE_SOURCES:
            raise NasutilError(f"objectives.scored_on must be one of {', '.join(HARDWARE_SOURCES)}, got {scored_on!r}")
        return cls(tuple(METRICS[n] for n in names), slo, floor, scored_on)

    def hardware_source(self, record: dict[str, Any]) -> str:
        """Which figures a trained trial is scored on: `measured` or `predicted`."""
        if self.scored_on == "auto":
            return "measured" if record.get("measured_latency_ms") is not None else "predicted"
        return self.scored_on

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.metrics]

    @property
    def directions(self) -> list[str]:
        return [m.direction for m in self.metrics]

    @property
    def hardware(self) -> list[Metric]:
        return [m for m in self.metrics if m.name != "accuracy"]

    def values(self, record: dict[str, Any], missing_as_worst: bool = False) -> list[float]:
        """The objective values in study order. A missing figure is an error, or, for a trial pruned
        before it could be measured, the metric's worst value (it must rank below any real one)."""
        out = []
        for m in self.metrics:
            value = record.get(m.key)
            if value is None and not missing_as_worst:
                raise NasutilError(f"trial has no {m.name} to report")
            out.append(m.worst if value is None else float(value))
        return out

    def constraints(self, record: dict[str, Any]) -> dict[str, float]:
        """Constraint name -> value; feasible where every value is <= 0."""
        out = {}
        if self.latency_slo_ms is not None and record.get("latency_ms") is not None:
            out["latency_slo"] = float(record["latency_ms"]) - self.latency_slo_ms
        if self.min_accuracy is not None and record.get("accuracy") is not None:
            out["min_accuracy"] = self.min_accuracy - float(record["accuracy"])
        return out


def _number(value: Any, name: str) -> float | None:
    """A finite number or None; anything else is a one-line error naming the setting."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise NasutilError(f"{name} must be a number or null, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise NasutilError(f"{name} must be a finite number or null, got {value!r}")
    return number
