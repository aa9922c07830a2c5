"""Fit device profiles from evaluator measurements, and predict with them."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from nasutil.counting import ModelCounts, count_model
from nasutil.errors import NasutilError
from nasutil.predictor.analytical import AnalyticalPredictor
from nasutil.predictor.base import Prediction, PredictTarget, prediction_from_latency
from nasutil.predictor.features import operator_features
from nasutil.predictor.learned import LearnedLatencyModel
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


def counts_for(space: SearchSpace, arch_text: str, input_size: int | None = None) -> tuple[ModelCounts, np.ndarray]:
    arch = space.parse(arch_text)
    size = input_size or space.default_input_size
    return count_model(space.build(arch, input_size=size), size, space.in_channels), arch.encode()


def feature_vector(encoding: np.ndarray, counts: ModelCounts | None, target: PredictTarget, features: str,
                   analytical: AnalyticalPredictor) -> np.ndarray:
    if features == "encoding":
        return encoding.astype(np.float64)
    return np.concatenate([encoding, operator_features(counts, target, analytical)])


def fit_profile(rows: list[dict], *, features: str = "encoding+operators", min_rows: int = 50,
                min_clock_ratio: float = 0.95, source: str = "", progress=None) -> DeviceProfile:
    """One learned model per (space, dtype, batch size, mode) with at least `min_rows` distinct archs.

    Measurements taken while the SM clock was below `min_clock_ratio` of the highest clock seen
    in their group are left out; repeated measurements of an arch are reduced to their median."""
    if features not in FEATURE_SETS:
        raise NasutilError(f"unknown feature set {features!r} (choose from {', '.join(FEATURE_SETS)})")
    devices = {r["device_name"] for r in rows}
    if len(devices) != 1:
        raise NasutilError(f"measurements must come from one device, found {sorted(devices) or 'none'}")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        if r.get("space") in ("torchvision", "timm"):
            continue
        groups[(r["space"], r["dtype"], r["batch_size"], r["mode"])].append(r)
    device = devices.pop()
    first = rows[0]
    profile = DeviceProfile(device_name=device, driver_version=first.get("driver_version") or None,
                            torch_version=first.get("torch_version") or None, source=source)
    for (space_name, dtype, batch, mode), members in sorted(groups.items()):
        clocks = [m["sm_clock_mhz"] for m in members if m["sm_clock_mhz"] is not None]
        floor = min_clock_ratio * max(clocks) if clocks else 0.0
        latencies: dict[str, list[float]] = defaultdict(list)
        for m in members:
            if m["sm_clock_mhz"] is None or m["sm_clock_mhz"] >= floor:
                latencies[m["arch"]].append(m["latency_ms"])
        if len(latencies) < min_rows:
            continue
        space = get_space(space_name)
        target = PredictTarget(device, dtype, batch, mode)
        analytical = AnalyticalPredictor(profile.kernel_model(dtype, mode))
        x, y = [], []
        for arch, values in latencies.items():
            counts, encoding = counts_for(space, arch) if features != "encoding" else (None, space.parse(arch).encode())
            x.append(feature_vector(encoding, counts, target, features, analytical))
            y.append(statistics.median(values))
            if progress:
                progress()
        model = LearnedLatencyModel().fit(np.array(x), np.array(y))
        profile.learned.append(LearnedEntry(space_name, dtype, batch, mode, features, model, len(y)))
    if not profile.learned:
        raise NasutilError(f"no (space, dtype, batch, mode) group has {min_rows} or more distinct architectures")
    return profile


def predict(space: SearchSpace, space_spec: str, arch_text: str, profile: DeviceProfile, target: PredictTarget,
            predictor: str = "auto") -> Prediction:
    """Predict with the profile's learned model for this space and configuration where it has one
    (`auto` or `learned`), else with the analytical model and the profile's constants."""
    arch = space.parse(arch_text)
    entry = profile.learned_for(space_spec, target.dtype, target.batch_size, target.mode)
    if predictor == "learned" and entry is None:
        raise NasutilError(f"profile has no learned model for {space_spec} at {target.dtype}, batch "
                           f"{target.batch_size}, {target.mode} (use --predictor analytical)")
    analytical = AnalyticalPredictor(profile.kernel_model(target.dtype, target.mode))
    size = space.default_input_size
    counts = count_model(space.build(arch, input_size=size), size, space.in_channels)
    if predictor in ("auto", "learned") and entry is not None:
        vector = feature_vector(arch.encode(), counts, target, entry.features, analytical)
        latency = float(entry.model.predict_ms(vector)[0])
        return prediction_from_latency(counts, target, latency, "learned", space_spec, arch.to_string())
    return analytical.predict(counts, target, space=space_spec, arch=arch.to_string())
