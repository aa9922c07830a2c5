"""Batch-size sweep: where throughput saturates, and the largest batch under a latency SLO."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nasutil.evaluator.candidate import Candidate
from nasutil.evaluator.evaluator import Evaluator
from nasutil.evaluator.measurement import Measurement


@dataclass
class SweepResult:
    points: list[Measurement]
    saturation_batch: int | None  # smallest batch reaching `saturation` of the best throughput
    best_throughput_per_s: float | None
    slo_batch: int | None  # largest batch whose latency is within the SLO

    def to_dict(self) -> dict:
        return {"saturation_batch": self.saturation_batch, "best_throughput_per_s": self.best_throughput_per_s,
                "slo_batch": self.slo_batch, "points": [p.to_dict(with_layers=False) for p in self.points]}


def sweep_batch(evaluator: Evaluator, candidate: Candidate, *, max_batch: int = 4096, saturation: float = 0.95,
                plateau_gain: float = 0.03, slo_ms: float | None = None,
                on_point: Callable[[Measurement], None] | None = None) -> SweepResult:
    """Double the batch from 1 until two batches in a row fail to beat the best throughput so far by
    `plateau_gain`, memory runs out, the SLO is exceeded (when given and already past), or
    `max_batch` is reached. `on_point` sees each batch's measurement as it is taken (to keep it where the
    sweep is stopped before its end)."""
    points: list[Measurement] = []
    batch, flat = 1, 0
    while batch <= max_batch:
        m = evaluator.measure(candidate, evaluator.config.with_(batch_size=batch))
        if on_point is not None:
            on_point(m)
        if not m.ok:
            points.append(m)  # kept, with its reason: usually where memory ran out
            break
        best = max((p.throughput_per_s for p in points), default=0.0)
        flat = flat + 1 if best and m.throughput_per_s < best * (1 + plateau_gain) else 0
        points.append(m)
        if flat >= 2 or (slo_ms is not None and m.latency_ms > slo_ms and flat >= 1):
            break
        batch *= 2
    ok = [p for p in points if p.ok]  # the last point may be the failure that ended the sweep
    if not ok:
        return SweepResult(points, None, None, None)
    best = max(p.throughput_per_s for p in ok)
    saturated = min(p.batch_size for p in ok if p.throughput_per_s >= saturation * best)
    within = [p.batch_size for p in ok if slo_ms is not None and p.latency_ms <= slo_ms]
    return SweepResult(points, saturated, best, max(within) if within else None)
