"""Learned predictor: gradient-boosted trees on arch encodings and operator features.

It is stored in plain JSON as its training data (features, targets, hyper-parameters), so that it
can be refitted and extended, and as its fitted trees (`nasutil.predictor.trees`), so that a loaded
model predicts at once with numpy alone: no refit, no scikit-learn import, and no pickled model ever
has to be trusted. A profile written before the trees were saved is refitted on first use.
"""

from __future__ import annotations

import numpy as np

from nasutil.errors import NasutilError
from nasutil.predictor import profile_checks as check
from nasutil.predictor.trees import TreeEnsemble

DEFAULT_PARAMS = {"max_iter": 400, "learning_rate": 0.06, "max_leaf_nodes": 31, "min_samples_leaf": 8,
                  "l2_regularization": 1e-3, "random_state": 0}


class LearnedLatencyModel:
    """Regresses log latency. `fit` on rows of features; `predict_ms` on new rows."""

    def __init__(self, params: dict | None = None) -> None:
        self.params = {**DEFAULT_PARAMS, **(params or {})}
        self._trees: TreeEnsemble | None = None
        self._x: np.ndarray | None = None
        self._y: np.ndarray | None = None

    def fit(self, features: np.ndarray, latency_ms: np.ndarray) -> LearnedLatencyModel:
        features = np.asarray(features, dtype=np.float64)
        latency_ms = np.asarray(latency_ms, dtype=np.float64)
        if len(features) < 10 or len(features) != len(latency_ms) or (latency_ms <= 0).any():
            raise NasutilError("a learned predictor needs at least 10 rows of features and positive latencies")
        self._x, self._y = features, latency_ms
        self._trees = None
        self._fitted()
        return self

    @property
    def n_features(self) -> int | None:
        return None if self._x is None else int(self._x.shape[1])

    def _fitted(self) -> TreeEnsemble:
        if self._trees is None:
            from sklearn.ensemble import HistGradientBoostingRegressor
            from threadpoolctl import threadpool_limits

            # One thread: beside other busy processes OpenMP workers spin-wait, and a fit that takes 5 s on
            # one thread of a loaded 2-core machine took 88 s on two.
            with threadpool_limits(limits=1):
                model = HistGradientBoostingRegressor(**self.params).fit(self._x, np.log(self._y))
            self._trees = TreeEnsemble.from_sklearn(model)
        return self._trees

    def predict_ms(self, features: np.ndarray) -> np.ndarray:
        if self._x is None:
            raise NasutilError("the learned predictor has not been fitted")
        features = np.atleast_2d(np.asarray(features, dtype=np.float64))
        if features.shape[1] != self.n_features:
            raise NasutilError(f"the learned model was fitted on {self.n_features} features but got "
                               f"{features.shape[1]}: the profile predates this nasutil's features; refit it "
                               f"with `nasutil profile fit`")
        return np.exp(self._fitted().predict(features))

    def to_dict(self) -> dict:
        if self._x is None:
            raise NasutilError("nothing to save: the learned predictor has not been fitted")
        return {"kind": "hist_gradient_boosting", "params": self.params, "features": self._x.tolist(),
                "latency_ms": self._y.tolist(), "trees": self._fitted().to_dict()}

    @classmethod
    def from_dict(cls, data: dict, where: str = "model") -> LearnedLatencyModel:
        """From a profile's JSON, every field checked first (`nasutil.predictor.profile_checks`)."""
        check.only_keys(data, {"kind", "params", "features", "latency_ms", "trees"}, where)
        if data.get("kind") != "hist_gradient_boosting":
            raise NasutilError(f"unknown learned-model kind {data.get('kind')!r}")
        model = cls(check.learned_params(data.get("params"), f"{where}.params"))
        model._x = check.matrix(data.get("features"), f"{where}.features")
        model._y = np.asarray(check.positive_list(data.get("latency_ms"), f"{where}.latency_ms", len(model._x)))
        if data.get("trees") is not None:
            model._trees = TreeEnsemble.from_dict(data["trees"], f"{where}.trees")
            if model._trees.n_features != model.n_features:
                raise check.BadProfile(f"{where}.trees.n_features", f"must equal the {model.n_features} features "
                                                                    f"of its training rows")
        return model  # without trees: fitted on first use
