"""Tables a search leaves in its run folder: every trial (trials.csv) and the Pareto front (pareto.csv)."""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from nasutil.errors import NasutilError
from nasutil.pareto import pareto_mask
from nasutil.search.objectives import METRICS
from nasutil.search.record import feasible, generation, hardware_figures, has_accuracy, outcome

# Leading columns, in this order; any other user attribute follows, sorted.
COLUMNS = ("number", "outcome", "state", "generation", "arch", "accuracy", "throughput_per_s", "latency_ms", "utilization", "hardware_source",
           "unmeasured_reason", "predicted_throughput_per_s", "predicted_latency_ms", "predicted_utilization", "predictor",
           "measured_throughput_per_s", "measured_latency_ms", "measured_utilization", "measured_device",
           "flops_per_image", "params", "prune_stage", "prune_policy", "prune_reason", "training_epochs",
           "duplicate_of", "feasible", "fail_reason", "duration_s", "datetime_start")
SKIP = ("curve", "fail_traceback", "constraints", "accuracy_detail")


def metric_names(study: optuna.Study) -> list[str]:
    names = study.user_attrs.get("metrics")
    return list(names) if names else [f"value_{i}" for i in range(len(study.directions))]


def trial_row(t: FrozenTrial) -> dict[str, Any]:
    row: dict[str, Any] = {"number": t.number, "outcome": outcome(t), "state": t.state.name,
                           "generation": generation(t)}
    attrs = t.user_attrs
    for key, value in attrs.items():
        if key in SKIP:
            continue
        row[key] = value
    for key, value in (attrs.get("accuracy_detail") or {}).items():
        row[key] = value
    if not has_accuracy(t):
        row.pop("accuracy", None)
    if attrs.get("predicted_latency_ms") is not None:
        row.update(hardware_figures(attrs))
    row["feasible"] = feasible(t) if has_accuracy(t) else ""
    if t.state == TrialState.FAIL and "fail_reason" not in row:
        row["fail_reason"] = t.system_attrs.get("fail_reason", "")
    row["duration_s"] = round(t.duration.total_seconds(), 3) if t.duration else ""
    row["datetime_start"] = t.datetime_start.isoformat(timespec="seconds") if t.datetime_start else ""
    return row


def pareto_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Trained, feasible trials that no other such trial dominates on the study's objectives (pruned
    trials recorded as COMPLETE for the sampler's sake are not trained ones)."""
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.values is not None and outcome(t) == "trained" and feasible(t)]
    directions = ["maximize" if d == optuna.study.StudyDirection.MAXIMIZE else "minimize" for d in study.directions]
    mask = pareto_mask([t.values for t in done], directions)
    front = [t for t, keep in zip(done, mask) if keep]
    return sorted(front, key=lambda t: [-v if d == "maximize" else v for v, d in zip(t.values, directions)])


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return "" if not math.isfinite(value) else f"{value:.6g}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return "" if value is None else value


def write_csv(path: Path, rows: list[dict[str, Any]], leading: tuple[str, ...] = COLUMNS) -> None:
    keys: list[str] = list(leading)  # always there, empty where no trial has a value
    keys += sorted({k for r in rows for k in r} - set(keys))
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")  # workers sharing a folder write their own
    try:
        with tmp.open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=keys)
            writer.writeheader()
            for r in rows:
                writer.writerow({k: _cell(r.get(k)) for k in keys})
        tmp.replace(path)  # never leave a half-written table where a complete one was
    except OSError as exc:  # the table's own name in the error, and no temporary file left behind
        tmp.unlink(missing_ok=True)
        raise NasutilError(f"cannot write {str(path)!r}: {exc.strerror or type(exc).__name__}") from None


def write_tables(study: optuna.Study, folder: Path) -> dict[str, Path]:
    trials = study.get_trials(deepcopy=False)
    out = {"trials": folder / "trials.csv", "pareto": folder / "pareto.csv"}
    write_csv(out["trials"], [trial_row(t) for t in trials])
    names = metric_names(study)
    front = []
    for rank, t in enumerate(pareto_trials(study), start=1):
        row = {"rank": rank, **{f"objective_{n}": v for n, v in zip(names, t.values)}, **trial_row(t)}
        front.append(row)
    write_csv(out["pareto"], front, ("rank", *(f"objective_{n}" for n in names), *COLUMNS))
    return out


def axis_label(name: str) -> str:
    metric = METRICS.get(name)
    return metric.label if metric else name
