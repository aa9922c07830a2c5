"""Fitted trees saved as numbers: the same predictions as the fitted model, and nothing else is loaded."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import numpy as np
import pytest

from nasutil.errors import NasutilError
from nasutil.predictor.learned import DEFAULT_PARAMS, LearnedLatencyModel
from nasutil.predictor.trees import TreeEnsemble


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(600, 12))
    y = np.exp(x[:, 0] + 0.5 * np.sin(3 * x[:, 1]) + 0.2 * x[:, 2] ** 2)
    return x, y, LearnedLatencyModel({"max_iter": 120}).fit(x, y)


def test_saved_trees_predict_exactly_what_scikit_learn_predicts(fitted):
    from sklearn.ensemble import HistGradientBoostingRegressor

    x, y, model = fitted
    reference = HistGradientBoostingRegressor(**{**DEFAULT_PARAMS, "max_iter": 120}).fit(x, np.log(y))
    queries = np.random.default_rng(4).normal(size=(2000, 12)) * 2
    queries[::5, 1] = np.nan  # missing values follow the side the fit learned
    loaded = LearnedLatencyModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert np.array_equal(loaded.predict_ms(queries), np.exp(reference.predict(queries)))


def _bad(fitted, change) -> str:
    data = copy.deepcopy(fitted[2].to_dict()["trees"])
    change(data)
    with pytest.raises(NasutilError) as err:
        TreeEnsemble.from_dict(json.loads(json.dumps(data).replace("NaN", "NaN")))
    return str(err.value)


def test_a_damaged_tree_is_refused_naming_the_field(fitted):
    def loop(d):  # an inner node whose child points back to the root: a walk would never end
        inner = next(i for i, v in enumerate(d["left"]) if v >= 0)
        d["left"][inner] = 0

    def stray(d):
        inner = next(i for i, v in enumerate(d["left"]) if v >= 0)
        d["right"][inner] = len(d["right"]) + 5

    assert "child indices" in _bad(fitted, loop)
    assert "child indices" in _bad(fitted, stray)
    assert "trees.feature" in _bad(fitted, lambda d: d["feature"].__setitem__(0, 99))
    assert "trees.threshold" in _bad(fitted, lambda d: d["threshold"].__setitem__(0, float("nan")))
    assert "one length" in _bad(fitted, lambda d: d["value"].pop())
    assert "trees.starts" in _bad(fitted, lambda d: d.__setitem__("starts", [0, 0]))
    assert "unknown key" in _bad(fitted, lambda d: d.__setitem__("code", "import os"))
    message = _bad(fitted, lambda d: d["missing_left"].__setitem__(0, 7))
    assert "\n" not in message and "missing_left" in message


def test_the_shipped_profile_predicts_without_scikit_learn_or_torch():
    code = ("import sys\nfrom nasutil.predictor import predict_many\n"
            "p = predict_many('nb201', ['|nor_conv_3x3~0|+|nor_conv_3x3~0|skip_connect~1|+|skip_connect~0|none~1|"
            "nor_conv_3x3~2|'], predictor='learned')[0]\n"
            "assert p.latency_ms > 0, p\n"
            "print(sorted(m for m in ('sklearn', 'torch', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
