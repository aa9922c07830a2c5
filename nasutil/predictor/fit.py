"""Fit device profiles from evaluator measurements, and predict with them."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from nasutil.errors import NasutilError
from nasutil.operators import Op, network_flops
from nasutil.predictor.analytical import AnalyticalPredictor
from nasutil.predictor.base import Prediction, PredictTarget, prediction_from_latency
from nasutil.predictor.features import operator_features
from nasutil.predictor.learned import LearnedLatencyModel
from nasutil.predictor.operator_level import OperatorPredictor, fit_overlap
from nasutil.predictor.profile import DeviceProfile, LearnedEntry
from nasutil.registry import get_space
from nasutil.space import SearchSpace

FEATURE_SETS = ("encoding", "encoding+operators")


def read_measurements(paths: Iterable[str | Path]) -> list[dict]:
    """Successful measurements from evaluator outputs: JSON lines (`--json`/`--out`) or CSV."""
    rows: list[dict] = []
    for path in map(Path, paths):
        files = sorted(path.glob("*.csv")) + sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
        for file in files:
            try:
                text = file.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise NasutilError(f"cannot read {str(file)!r}: {exc}") from None
            if file.suffix == ".csv":
                rows += [dict(r) for r in csv.DictReader(text.splitlines())]
                continue
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError:
                        raise NasutilError(f"{file}:{number}: not a JSON object") from None
    return [_checked(r, i) for i, r in enumerate(rows, start=1)
            if isinstance(r, dict) and r.get("status") == "ok" and r.get("latency_ms") not in (None, "")]


_REQUIRED = ("space", "arch", "device_name", "dtype", "batch_size", "mode", "latency_ms")


def _checked(row: dict, number: int) -> dict:
    """A measurement row with the fields a profile needs, in their types; a one-line error otherwise."""
    missing = [k for k in _REQUIRED if row.get(k) in (None, "")]
    if missing:
        raise NasutilError(f"measurement {number} lacks {', '.join(missing)}")
    try:
        return {**row, "batch_size": int(row["batch_size"]), "latency_ms": float(row["latency_ms"]),
                "sm_clock_mhz": float(row["sm_clock_mhz"]) if row.get("sm_clock_mhz") not in (None, "") else None}
    except (TypeError, ValueError) as exc:
        raise NasutilError(f"measurement {number} has a malformed number: {exc}") from None


def ops_for(space: SearchSpace, arch_text: str, input_size: int | None = None) -> tuple[list[Op], np.ndarray]:
    arch = space.parse(arch_text)
    return space.operators(arch, input_size=input_size), arch.encode()


def feature_vector(encoding: np.ndarray, ops: list[Op] | None, target: PredictTarget, features: str,
                   analytical: AnalyticalPredictor, operators: OperatorPredictor | None = None,
                   space: str = "") -> np.ndarray:
    if features == "encoding":
        return encoding.astype(np.float64)
    return np.concatenate([encoding, operator_features(ops, target, analytical, operators, space)])


def fit_profile(rows: list[dict], *, features: str = "encoding+operators", min_rows: int = 50,
                min_clock_ratio: float = 0.95, source: str = "", progress=None,
                base: DeviceProfile | None = None) -> DeviceProfile:
    """One learned model per (space, dtype, batch size, mode) with at least `min_rows` distinct archs.

    Measurements taken while the SM clock was below `min_clock_ratio` of the highest clock seen
    in their group, or at another input size than the space's default, are left out; repeated
    measurements of an arch are reduced to their median. With `base` (a profile with operator tables), the tables' overlap constants are fitted to
    the same measurements and the learned models see the operator-level prediction too."""
    if features not in FEATURE_SETS:
        raise NasutilError(f"unknown feature set {features!r} (choose from {', '.join(FEATURE_SETS)})")
    devices = {r["device_name"] for r in rows}
    if len(devices) != 1:
        raise NasutilError(f"measurements must come from one device, found {sorted(devices) or 'none'}")
    device = devices.pop()
    if base is not None and base.device_name != device:
        raise NasutilError(f"measurements come from {device!r} but the profile is for {base.device_name!r}")
    first = rows[0]
    profile = base or DeviceProfile(device_name=device, driver_version=first.get("driver_version") or None,
                                    torch_version=first.get("torch_version") or None)
    profile.source = source or profile.source
    profile.learned = []
    operators = OperatorPredictor(profile.operators) if profile.operators else None
    rows = [r for r in rows if r.get("space") not in ("torchvision", "timm") and _default_size(r)]
    groups = median_latencies(rows, min_clock_ratio)
    networks: dict[tuple, dict[str, tuple[list[Op], np.ndarray]]] = {}
    for (space_name, dtype, batch, mode), latencies in sorted(groups.items()):
        space = get_space(space_name)
        networks[(space_name, dtype, batch, mode)] = {arch: ops_for(space, arch) for arch in latencies}
    if operators is not None:
        _fit_overlaps(operators, device, groups, networks)
    for (space_name, dtype, batch, mode), latencies in sorted(groups.items()):
        if len(latencies) < min_rows:
            continue
        target = PredictTarget(device, dtype, batch, mode)
        analytical = AnalyticalPredictor(profile.kernel_model(dtype, mode))
        x, y, op_level = [], [], []
        for arch, value in latencies.items():
            ops, encoding = networks[(space_name, dtype, batch, mode)][arch]
            x.append(feature_vector(encoding, ops, target, features, analytical, operators, space_name))
            y.append(value)
            if operators is not None and target.key in operators.tables:
                op_level.append(operators.predict_latency_ms(ops, target, space_name))
            if progress:
                progress()
        x_all, y_all = np.array(x), np.array(y)
        validation = _validate(x_all, y_all, np.array(op_level) if op_level else None)
        model = LearnedLatencyModel().fit(x_all, y_all)
        profile.learned.append(LearnedEntry(space_name, dtype, batch, mode, features, model, len(y), validation))
    if not profile.learned and not profile.operators:
        raise NasutilError(f"no (space, dtype, batch, mode) group has {min_rows} or more distinct architectures")
    return profile


def _default_size(row: dict) -> bool:
    size = row.get("input_size")
    return size in (None, "") or int(size) == get_space(row["space"]).default_input_size


def _validate(x: np.ndarray, y: np.ndarray, op_level: np.ndarray | None, held_out: float = 0.2) -> dict[str, float]:
    """Held-out MAPE of the learned model (fitted on the rest) and of the operator-level predictions,
    so that `auto` can pick the better one. (The operator-level overlap constants, three numbers,
    were fitted on all rows.)"""
    order = np.random.default_rng(0).permutation(len(y))
    test, train = order[: max(1, int(held_out * len(y)))], order[max(1, int(held_out * len(y))):]
    learned = LearnedLatencyModel().fit(x[train], y[train]).predict_ms(x[test])
    scores = {"learned": float(np.mean(np.abs(learned - y[test]) / y[test]))}
    if op_level is not None:
        scores["operators"] = float(np.mean(np.abs(op_level[test] - y[test]) / y[test]))
    return scores


def _fit_overlaps(operators: OperatorPredictor, device: str, groups: dict, networks: dict) -> None:
    """Each table's shared overlap constants on every space's networks, and each space's own."""
    pooled: dict[str, list] = defaultdict(list)
    for (space_name, dtype, batch, mode), latencies in groups.items():
        target = PredictTarget(device, dtype, batch, mode)
        if target.key not in operators.tables:
            continue
        measured = [(networks[(space_name, dtype, batch, mode)][a][0], latencies[a]) for a in latencies]
        fit_overlap(operators.tables[target.key], operators, target, measured, space=space_name)
        pooled[target.key] += measured
    for key, measured in pooled.items():
        table = operators.tables[key]
        fit_overlap(table, operators, PredictTarget(device, table.dtype, table.batch_size, table.mode), measured)


def median_latencies(rows: list[dict], min_clock_ratio: float = 0.95) -> dict[tuple, dict[str, float]]:
    """(space, dtype, batch, mode) -> arch -> median latency (ms) of the measurements at full clock."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("space") in ("torchvision", "timm"):
            continue
        groups[(r["space"], r["dtype"], r["batch_size"], r["mode"])].append(r)
    out = {}
    for key, members in groups.items():
        clocks = [m["sm_clock_mhz"] for m in members if m["sm_clock_mhz"] is not None]
        floor = min_clock_ratio * max(clocks) if clocks else 0.0
        latencies: dict[str, list[float]] = defaultdict(list)
        for m in members:
            if m["sm_clock_mhz"] is None or m["sm_clock_mhz"] >= floor:
                latencies[m["arch"]].append(m["latency_ms"])
        out[key] = {arch: statistics.median(v) for arch, v in latencies.items()}
    return out


class ProfilePredictor:
    """Predictions from one device profile. `auto` takes, for the space and configuration, whichever of
    the learned and operator-level predictors scored the lower held-out error when the profile was
    fitted; then the one the profile has; else the analytical model."""

    def __init__(self, profile: DeviceProfile) -> None:
        self.profile = profile
        self.operators = OperatorPredictor(profile.operators) if profile.operators else None

    def choose(self, space_spec: str, target: PredictTarget, predictor: str = "auto") -> str:
        learned = self.profile.learned_for(space_spec, target.dtype, target.batch_size, target.mode)
        has_table = self.operators is not None and target.key in self.operators.tables
        if predictor == "learned" and learned is None:
            raise NasutilError(f"profile has no learned model for {space_spec} at {target.dtype}, batch "
                               f"{target.batch_size}, {target.mode} (try --predictor operators or analytical)")
        if predictor == "operators" and not has_table:
            known = ", ".join(sorted(self.operators.tables)) if self.operators else "none"
            raise NasutilError(f"profile has no operator table for {target.key} (has: {known}; "
                               f"try --predictor analytical)")
        if predictor != "auto":
            return predictor
        if learned is not None and has_table and "operators" in learned.validation:
            return "learned" if learned.validation["learned"] <= learned.validation["operators"] else "operators"
        return "learned" if learned is not None else "operators" if has_table else "analytical"

    def predict_many(self, space: SearchSpace, space_spec: str, arch_texts: list[str], target: PredictTarget,
                     predictor: str = "auto", input_size: int | None = None) -> list[Prediction]:
        """Predictions for many archs; the learned model scores them in one batch, which is what makes
        it cheap per candidate (a single row costs the trees' fixed overhead of a few milliseconds)."""
        chosen = self.choose(space_spec, target, predictor)
        archs = [space.parse(text) for text in arch_texts]
        ops = [space.operators(arch, input_size=input_size) for arch in archs]
        analytical = AnalyticalPredictor(self.profile.kernel_model(target.dtype, target.mode))
        if chosen == "learned":
            entry = self.profile.learned_for(space_spec, target.dtype, target.batch_size, target.mode)
            vectors = np.array([feature_vector(arch.encode(), o, target, entry.features, analytical, self.operators,
                                               space_spec) for arch, o in zip(archs, ops)])
            latencies = [float(v) for v in entry.model.predict_ms(vectors)] if len(vectors) else []
        elif chosen == "operators":
            latencies = [self.operators.predict_latency_ms(o, target, space_spec) for o in ops]
        else:
            latencies = [analytical.predict_latency_ms(o, target) for o in ops]
        return [prediction_from_latency(network_flops(o), target, latency, chosen, space_spec, arch.to_string())
                for arch, o, latency in zip(archs, ops, latencies)]

    def predict(self, space: SearchSpace, space_spec: str, arch_text: str, target: PredictTarget,
                predictor: str = "auto", input_size: int | None = None) -> Prediction:
        return self.predict_many(space, space_spec, [arch_text], target, predictor, input_size)[0]


_LAST: list[ProfilePredictor] = []


def predict(space: SearchSpace, space_spec: str, arch_text: str, profile: DeviceProfile, target: PredictTarget,
            predictor: str = "auto", input_size: int | None = None) -> Prediction:
    """Predict one arch with `profile` (see `ProfilePredictor`; reused across calls for the same profile)."""
    if not _LAST or _LAST[0].profile is not profile:
        _LAST[:] = [ProfilePredictor(profile)]
    return _LAST[0].predict(space, space_spec, arch_text, target, predictor, input_size)
