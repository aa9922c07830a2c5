"""Which candidates to measure next: where an ensemble of learned predictors disagrees most.

Measuring costs seconds per candidate, predicting microseconds, so the measurements that
train a learned predictor should go where it is least sure. `choose_next` fits a few
gradient-boosted models on bootstrap resamples of what has been measured and picks the
pool candidates whose predicted log latency varies most between them, skipping
near-duplicates of a pick so that one batch of measurements spreads over the space.
"""

from __future__ import annotations

import numpy as np

from nasutil.predictor.learned import LearnedLatencyModel

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
