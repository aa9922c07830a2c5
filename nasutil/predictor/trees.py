"""Fitted regression trees as plain data: saved in a profile's JSON, evaluated with numpy.

A learned latency model is a sum of gradient-boosted trees. Refitting them from the training rows on
every load costs seconds and imports scikit-learn; pickling them would let a profile run code. So
the fitted trees are written out as numbers (per node: the feature and threshold it splits on, its
children, the side that missing values take, and a leaf's value) and read back with every index
checked, so that loading a profile executes nothing and a prediction needs only numpy.

All trees' nodes sit in one set of flat arrays (tree t owns nodes `starts[t]` to `starts[t+1]-1`),
so that loading checks them in a few vectorised passes and a prediction walks all trees at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nasutil.errors import NasutilError

#: bounds on what a profile may hold, checked before anything is built
MAX_TREES = 10_000
MAX_NODES = 1 << 22
FIELDS = ("feature", "threshold", "left", "right", "missing_left", "value")


@dataclass(frozen=True)
class TreeEnsemble:
    """`baseline + sum of trees`, the raw prediction of a gradient-boosted regressor.

    Per node (indices into the flat arrays): a leaf has `left == right == -1`; an inner node sends a
    row left where `x[feature] <= threshold`, and a missing value left where `missing_left`."""

    baseline: float
    n_features: int
    starts: np.ndarray  # int64, one per tree: its root
    feature: np.ndarray  # int64
    threshold: np.ndarray  # float64
    left: np.ndarray  # int64
    right: np.ndarray  # int64
    missing_left: np.ndarray  # bool
    value: np.ndarray  # float64

    @property
    def n_trees(self) -> int:
        return len(self.starts)

    def predict(self, x: np.ndarray) -> np.ndarray:
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        node = np.broadcast_to(self.starts, (len(x), self.n_trees)).copy()  # rows x trees
        rows = np.broadcast_to(np.arange(len(x))[:, None], node.shape)
        for _ in range(len(self.feature)):  # a child comes after its parent: the walk ends
            inner = self.left[node] >= 0
            if not inner.any():
                break
            at = node[inner]
            values = x[rows[inner], self.feature[at]]
            go_left = np.where(np.isnan(values), self.missing_left[at], values <= self.threshold[at])
            node[inner] = np.where(go_left, self.left[at], self.right[at])
        leaves = self.value[node]
        total = np.full(len(x), self.baseline)
        for t in range(self.n_trees):  # tree by tree, as the fitted model adds them: the same rounding
            total += leaves[:, t]
        return total

    @classmethod
    def from_sklearn(cls, model: Any) -> TreeEnsemble:
        """From a fitted `HistGradientBoostingRegressor` (numerical features only, one output)."""
        parts, starts, offset = [], [], 0
        for (predictor,) in model._predictors:
            nodes = predictor.nodes
            if nodes["is_categorical"].any():
                raise NasutilError("categorical splits cannot be saved as plain trees")
            leaf = nodes["is_leaf"].astype(bool)
            parts.append((np.where(leaf, 0, nodes["feature_idx"]), np.where(leaf, 0.0, nodes["num_threshold"]),
                          np.where(leaf, -1, nodes["left"].astype(np.int64) + offset),
                          np.where(leaf, -1, nodes["right"].astype(np.int64) + offset),
                          nodes["missing_go_to_left"].astype(bool) & ~leaf, np.where(leaf, nodes["value"], 0.0)))
            starts.append(offset)
            offset += len(nodes)
        columns = [np.concatenate(c) for c in zip(*parts)]
        return cls(float(np.ravel(model._baseline_prediction)[0]), int(model.n_features_in_),
                   np.asarray(starts, dtype=np.int64), columns[0].astype(np.int64), columns[1].astype(np.float64),
                   columns[2].astype(np.int64), columns[3].astype(np.int64), columns[4].astype(bool),
                   columns[5].astype(np.float64))

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "n_features": self.n_features, "starts": self.starts.tolist(),
                "feature": self.feature.tolist(), "threshold": self.threshold.tolist(), "left": self.left.tolist(),
                "right": self.right.tolist(), "missing_left": self.missing_left.astype(int).tolist(),
                "value": self.value.tolist()}

    @classmethod
    def from_dict(cls, data: Any, where: str = "trees") -> TreeEnsemble:
        """Every field checked: a bad profile is refused with the field named, never half-loaded."""
        from nasutil.predictor.profile_checks import BadProfile, mapping, number, only_keys

        data = mapping(data, where)
        only_keys(data, {"baseline", "n_features", "starts", *FIELDS}, where)
        baseline = number(data.get("baseline"), f"{where}.baseline", -1e6, 1e6)
        n_features = int(number(data.get("n_features"), f"{where}.n_features", 1, 1 << 20, integer=True))
        starts = _numbers(data.get("starts"), f"{where}.starts", MAX_TREES, whole=True)
        arrays = {name: _numbers(data.get(name), f"{where}.{name}", MAX_NODES, whole=name != "threshold"
                                 and name != "value") for name in FIELDS}
        n = len(arrays["feature"])
        if any(len(a) != n for a in arrays.values()):
            raise BadProfile(where, "its node lists must have one length")
        starts = starts.astype(np.int64)
        if starts[0] != 0 or (np.diff(starts) <= 0).any() or starts[-1] >= n:
            raise BadProfile(f"{where}.starts", "must begin at 0 and rise inside the node lists")
        ends = np.append(starts[1:], n)[np.searchsorted(starts, np.arange(n), side="right") - 1]  # per node
        index = np.arange(n)
        left, right = arrays["left"].astype(np.int64), arrays["right"].astype(np.int64)
        inner = left >= 0
        # children after their parent and inside its tree: a walk from a root always ends at a leaf
        if ((right >= 0) != inner).any() or (left[~inner] != -1).any() or (right[~inner] != -1).any() \
                or (left[inner] <= index[inner]).any() or (right[inner] <= index[inner]).any() \
                or (left[inner] >= ends[inner]).any() or (right[inner] >= ends[inner]).any():
            raise BadProfile(where, "child indices must point forward inside their own tree, or be -1 for a leaf")
        feature = arrays["feature"].astype(np.int64)
        if (feature < 0).any() or (feature >= n_features).any():
            raise BadProfile(f"{where}.feature", f"must be feature indices 0 to {n_features - 1}")
        if not np.isin(arrays["missing_left"], (0, 1)).all():
            raise BadProfile(f"{where}.missing_left", "must hold 0 or 1")
        if (np.abs(arrays["value"]) > 1e6).any():
            raise BadProfile(f"{where}.value", "holds a leaf value out of range")
        return cls(baseline, n_features, starts, feature, arrays["threshold"].astype(np.float64), left, right,
                   arrays["missing_left"].astype(bool), arrays["value"].astype(np.float64))


def _numbers(values: Any, where: str, most: int, whole: bool) -> np.ndarray:
    from nasutil.predictor.profile_checks import BadProfile

    if not isinstance(values, list) or not 1 <= len(values) <= most:
        raise BadProfile(where, f"must be a list of 1 to {most:,} numbers")
    try:
        array = np.asarray(values)
    except ValueError:
        array = None
    if array is None or array.ndim != 1 or array.dtype.kind not in "iuf":
        raise BadProfile(where, "must hold numbers only")
    if not np.isfinite(array.astype(np.float64)).all():
        raise BadProfile(where, "must hold finite numbers only")
    if whole and (array != np.round(array)).any():
        raise BadProfile(where, "must hold whole numbers")
    return array
