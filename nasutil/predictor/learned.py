"""Learned predictor: gradient-boosted trees on arch encodings and operator features.

It is stored as its training data (features, targets, hyper-parameters) in plain JSON
and refitted when loaded: deterministic, fast (seconds for thousands of rows), and no
pickled model ever has to be trusted.
"""

from __future__ import annotations

import numpy as np

from nasutil.errors import NasutilError

DEFAULT_PARAMS = {"max_iter": 400, "learning_rate": 0.06, "max_leaf_nodes": 31, "min_samples_leaf": 8,
                  "l2_regularization": 1e-3, "random_state": 0}


class LearnedLatencyModel:
    """Regresses log latency. `fit` on rows of features; `predict_ms` on new rows."""

    def __init__(self, params: dict | None = None) -> None:
        self.params = {**DEFAULT_PARAMS, **(params or {})}
        self._model = None
        self._x: np.ndarray | None = None
        self._y: np.ndarray | None = None

    def fit(self, features: np.ndarray, latency_ms: np.ndarray) -> LearnedLatencyModel:
        from sklearn.ensemble import HistGradientBoostingRegressor

        features = np.asarray(features, dtype=np.float64)
        latency_ms = np.asarray(latency_ms, dtype=np.float64)
        if len(features) < 10 or len(features) != len(latency_ms) or (latency_ms <= 0).any():
            raise NasutilError("a learned predictor needs at least 10 rows of features and positive latencies")
        self._x, self._y = features, latency_ms
        self._model = HistGradientBoostingRegressor(**self.params).fit(features, np.log(latency_ms))
        return self

    def predict_ms(self, features: np.ndarray) -> np.ndarray:
        if self._model is None:
            raise NasutilError("the learned predictor has not been fitted")
        return np.exp(self._model.predict(np.atleast_2d(np.asarray(features, dtype=np.float64))))

    def to_dict(self) -> dict:
        if self._x is None:
            raise NasutilError("nothing to save: the learned predictor has not been fitted")
        return {"kind": "hist_gradient_boosting", "params": self.params, "features": self._x.tolist(),
                "latency_ms": self._y.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> LearnedLatencyModel:
        if data.get("kind") != "hist_gradient_boosting":
            raise NasutilError(f"unknown learned-model kind {data.get('kind')!r}")
        return cls(data.get("params")).fit(np.array(data["features"]), np.array(data["latency_ms"]))
