"""Which candidates to measure next: where an ensemble of learned predictors disagrees most.

Measuring costs seconds per candidate, predicting microseconds, so the measurements that
train a learned predictor should go where it is least sure. `choose_next` fits a few
gradient-boosted models on bootstrap resamples of what has been measured and picks the
pool candidates whose predicted log latency varies most between them, skipping
near-duplicates of a pick so that one batch of measurements spreads over the space.
`next_to_measure` does it for arch strings (`nasutil profile next`): each arch's features are
its encoding and its operator features under a device profile (`arch_features`).

    device, latencies = measured_latencies(rows, "nb201", "fp16", 256, "cudagraph")
    pool = unmeasured_pool("nb201", latencies, 5000, seed=0)
    target = PredictTarget(device, "fp16", 256, "cudagraph")
    archs = next_to_measure("nb201", latencies, pool, target, load_profile("h200"), count=50)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nasutil.errors import NasutilError
from nasutil.predictor.analytical import RooflineModel
from nasutil.predictor.features import feature_vector
from nasutil.predictor.learned import LearnedLatencyModel
from nasutil.predictor.prediction import PredictTarget
from nasutil.predictor.profile import DeviceProfile
from nasutil.predictor.training_data import median_latencies
from nasutil.registry import get_space

ENSEMBLE = 5
ENSEMBLE_PARAMS = {"max_iter": 150, "learning_rate": 0.1}


def disagreement(features: np.ndarray, latency_ms: np.ndarray, pool: np.ndarray, seed: int = 0) -> np.ndarray:
    """Standard deviation of the ensemble's log-latency predictions for each pool row."""
    rng = np.random.default_rng(seed)
    predictions = []
    for member in range(ENSEMBLE):
        rows = rng.integers(len(features), size=len(features))
        model = LearnedLatencyModel({**ENSEMBLE_PARAMS, "random_state": member})
        model.fit(features[rows], latency_ms[rows])
        predictions.append(np.log(model.predict_ms(pool)))
    return np.std(predictions, axis=0)


def choose_next(features: np.ndarray, latency_ms: np.ndarray, pool: np.ndarray, count: int,
                seed: int = 0) -> list[int]:
    """Indices of `count` pool rows to measure next (most disagreement first, no exact duplicates)."""
    count = min(count, len(pool))
    spread = disagreement(features, latency_ms, pool, seed)
    picked: list[int] = []
    seen: set[bytes] = set()
    for index in np.argsort(-spread):
        key = np.round(pool[index], 6).tobytes()
        if key in seen:
            continue
        seen.add(key)
        picked.append(int(index))
        if len(picked) == count:
            break
    return picked


#: the fewest measured archs of a configuration that an ensemble is fitted on
MIN_MEASURED = 10


def measured_latencies(rows: list[dict], space: str, dtype: str, batch_size: int, mode: str,
                       skipped: dict[str, int] | None = None) -> tuple[str, dict[str, float]]:
    """The device that measurement `rows` (`training_data.read_measurements`) come from, and each arch's median
    latency (ms) at this configuration, the rows of it left out (`median_latencies`) counted in `skipped`; a
    NasutilError where the rows come from several devices or hold fewer than MIN_MEASURED archs of it."""
    devices = {r["device_name"] for r in rows}
    if len(devices) > 1:
        raise NasutilError(f"measurements must come from one device, found {sorted(devices)}")
    key = (space, dtype, batch_size, mode)
    chosen = [r for r in rows if (r["space"], r["dtype"], r["batch_size"], r["mode"]) == key]
    latencies = median_latencies(chosen, skipped=skipped).get(key, {})
    if len(latencies) < MIN_MEASURED:
        raise NasutilError(f"need at least {MIN_MEASURED} measured {space} archs at {dtype}, batch {batch_size}, "
                           f"{mode}; found {len(latencies)} (measure a random sample first)")
    return devices.pop(), latencies


def unmeasured_pool(space: str, measured: dict[str, float] | set[str], size: int, seed: int = 0) -> list[str]:
    """The distinct archs of `size` sampled from `space` (in order of first draw) that are not in `measured`."""
    sampled = dict.fromkeys(a.to_string() for a in get_space(space).sample_many(size, seed))
    return [a for a in sampled if a not in measured]


def arch_features(space: str, archs: Sequence[str], target: PredictTarget, profile: DeviceProfile) -> np.ndarray:
    """One row per arch: its encoding and its operator features at `target`, with the analytical and
    operator-table predictions of `profile` (the learned predictors' `encoding+operators` features)."""
    searched = get_space(space)
    analytical = RooflineModel(profile.kernel_model(target.dtype, target.mode))
    operators = profile.op_model

    def features(text: str) -> np.ndarray:
        arch = searched.parse(text)
        return feature_vector(arch.encode(), searched.operators(arch), target, "encoding+operators", analytical,
                              operators, space)

    return np.array([features(a) for a in archs])


def next_to_measure(space: str, latencies: dict[str, float], pool: Sequence[str], target: PredictTarget,
                    profile: DeviceProfile, count: int, seed: int = 0) -> list[str]:
    """Up to `count` archs of `pool` to measure next, most disagreement first: `choose_next` over the features
    of the measured archs (`latencies`: arch -> ms) and of the pool."""
    measured = list(latencies)
    picks = choose_next(arch_features(space, measured, target, profile), np.array([latencies[a] for a in measured]),
                        arch_features(space, pool, target, profile), count, seed=seed)
    return [pool[index] for index in picks]
