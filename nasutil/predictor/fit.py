"""Fit a device profile to evaluator measurements: overlap constants and learned models."""

from __future__ import annotations

import copy
import warnings
from collections import defaultdict

import numpy as np

from nasutil.errors import NasutilError, NasutilNotice
from nasutil.ops import Op
from nasutil.predictor.analytical import RooflineModel
from nasutil.predictor.features import FEATURE_SETS, feature_vector
from nasutil.predictor.learned import LearnedLatencyModel
from nasutil.predictor.op_tables import OpTableModel, fit_overlap
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.profile import DeviceProfile, LearnedEntry
from nasutil.predictor.profile_checks import MAX_VERSION_CHARS, clipped
from nasutil.predictor.training_data import (
    checked_rows,
    fittable,
    median_latencies,
    skipped_note,
)
from nasutil.registry import get_space
from nasutil.space import SearchSpace


def ops_for(space: SearchSpace, arch_text: str, input_size: int | None = None) -> tuple[list[Op], np.ndarray]:
    arch = space.parse(arch_text)
    return space.operators(arch, input_size=input_size), arch.encode()


def fit_profile(rows: list[dict], *, features: str = "encoding+operators", min_rows: int = 50,
                min_clock_ratio: float = 0.95, source: str = "", progress=None,
                base: DeviceProfile | None = None, skipped: dict[str, int] | None = None) -> DeviceProfile:
    """One learned model per (space, dtype, batch size, mode) with at least `min_rows` distinct archs.

    `rows` are as `training_data.read_measurements` gives them. Rows it cannot use are left out: a field
    missing or out of range (`training_data.checked_rows`), a model zoo's, an unknown space's or dtype's
    (`training_data.fittable`), one of another network than the one whose ops are listed
    (`training_data.unlike_listing`: another input size, say), or measured while the SM clock was below
    `min_clock_ratio` of the highest clock seen in its group. They are counted in `skipped` by reason; without
    it, a NasutilNotice says how many were left out and why. Repeated measurements of an arch are reduced to
    their median. With `base` (a profile with operator tables), the tables' overlap constants are fitted to
    the same measurements and the learned models see the operator-level prediction too."""
    if features not in FEATURE_SETS:
        raise NasutilError(f"unknown feature set {features!r} (choose from {', '.join(FEATURE_SETS)})")
    counts: dict[str, int] = {}
    try:
        return _fit(fittable(checked_rows(rows, counts), counts), features, min_rows, min_clock_ratio, source,
                    progress, base, counts)
    finally:
        if skipped is not None:
            for reason, n in counts.items():
                skipped[reason] = skipped.get(reason, 0) + n
        elif counts:
            warnings.warn(skipped_note(counts), NasutilNotice, stacklevel=2)


def _fit(rows: list[dict], features: str, min_rows: int, min_clock_ratio: float, source: str, progress,
         base: DeviceProfile | None, skipped: dict[str, int]) -> DeviceProfile:
    """`fit_profile` on rows checked and fittable, counting in `skipped` those it leaves out."""
    devices = {r["device_name"] for r in rows}
    if len(devices) != 1:
        raise NasutilError(f"measurements must come from one device, found {sorted(devices) or 'none'}")
    device = devices.pop()
    if base is not None and base.device_name != device:
        raise NasutilError(f"measurements come from {device!r} but the profile is for {base.device_name!r}")
    # `base` is the caller's (often a cached, shared profile): fit a copy of it
    profile = copy.deepcopy(base) if base is not None else DeviceProfile(
        device_name=device, driver_version=_version(rows, "driver_version"),
        torch_version=_version(rows, "torch_version"))
    profile.source = clipped(source) if source else profile.source
    profile.learned = []
    operators = OpTableModel(profile.operators) if profile.operators else None
    groups = median_latencies(rows, min_clock_ratio, skipped)
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
        analytical = RooflineModel(profile.kernel_model(dtype, mode))
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
        largest = max(groups.items(), key=lambda item: len(item[1]), default=None)
        found = (f"; the largest, {' '.join(map(str, largest[0]))}, has {len(largest[1])}" if largest else "")
        raise NasutilError(f"no (space, dtype, batch, mode) group has {min_rows} or more distinct architectures"
                           f"{found} (min_rows, --min-rows of nasutil profile fit, sets how many a fit needs)")
    return profile


def _version(rows: list[dict], key: str) -> str | None:
    """The first version (`key`) a fitted row gives as text a profile holds, or None: the rows' other fields
    are not checked with their latencies, and the first row's list or megabyte of text was copied into the
    profile (and a zoo model's version, a row the fit leaves out)."""
    return next((v for r in rows if isinstance(v := r.get(key), str) and 0 < len(v) <= MAX_VERSION_CHARS), None)


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


def _fit_overlaps(operators: OpTableModel, device: str, groups: dict, networks: dict) -> None:
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
