"""Which archs to measure next (`nasutil.predictor.active`, what `nasutil profile next` prints): the measured
latencies of one configuration, the unmeasured pool and the features, called from their home on the CPU."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from nasutil.errors import NasutilError
from nasutil.predictor import PredictTarget, load_profile
from nasutil.predictor.active import (arch_features, choose_next, measured_latencies, next_to_measure,
                                      unmeasured_pool)
from nasutil.predictor.features import feature_vector
from nasutil.predictor.training_data import read_measurements
from nasutil.registry import get_space

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    [source] = [p for p in RESULTS.rglob("predictor_data_nb201.csv")][:1]
    with source.open() as fh:
        kept = [r for r in csv.DictReader(fh) if r["batch_size"] == "256" and r["mode"] == "cudagraph"][:60]
    small = tmp_path_factory.mktemp("active") / "m.csv"
    with small.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(kept[0]))
        writer.writeheader()
        writer.writerows(kept)
    return read_measurements([small], {})


def test_measured_latencies_of_one_configuration(rows):
    device, latencies = measured_latencies(rows, "nb201", "fp16", 256, "cudagraph")
    assert device == rows[0]["device_name"] and len(latencies) >= 10 and all(v > 0 for v in latencies.values())
    with pytest.raises(NasutilError, match="need at least 10 measured nb201 archs at fp16, batch 8, cudagraph"):
        measured_latencies(rows, "nb201", "fp16", 8, "cudagraph")
    with pytest.raises(NasutilError, match="must come from one device"):
        measured_latencies([*rows, {**rows[0], "device_name": "another GPU"}], "nb201", "fp16", 256, "cudagraph")


def test_the_pool_holds_only_unmeasured_archs(rows):
    _, latencies = measured_latencies(rows, "nb201", "fp16", 256, "cudagraph")
    pool = unmeasured_pool("nb201", latencies, 300, seed=0)
    assert pool and not set(pool) & set(latencies) and len(set(pool)) == len(pool)
    sampled = {a.to_string() for a in get_space("nb201").sample_many(300, 0)}
    rest = unmeasured_pool("nb201", set(pool), 300, seed=0)  # what the pool left out: the measured ones drawn
    assert set(rest) <= set(latencies) and set(pool) | set(rest) == sampled


def test_features_are_the_encoding_and_operator_features(rows):
    profile = load_profile("h200")
    target = PredictTarget(rows[0]["device_name"], "fp16", 256, "cudagraph")
    arch = rows[0]["arch"]
    features = arch_features("nb201", [arch], target, profile)
    space = get_space("nb201")
    parsed = space.parse(arch)
    from nasutil.predictor.analytical import RooflineModel

    expected = feature_vector(parsed.encode(), space.operators(parsed), target, "encoding+operators",
                              RooflineModel(profile.kernel_model("fp16", "cudagraph")), profile.op_model, "nb201")
    assert features.shape == (1, len(expected)) and np.allclose(features[0], expected)


def test_next_to_measure_picks_distinct_unmeasured_archs(rows):
    device, latencies = measured_latencies(rows, "nb201", "fp16", 256, "cudagraph")
    profile = load_profile("h200")
    target = PredictTarget(device, "fp16", 256, "cudagraph")
    pool = unmeasured_pool("nb201", latencies, 300, seed=0)
    picks = next_to_measure("nb201", latencies, pool, target, profile, 4, seed=0)
    assert len(set(picks)) == 4 and set(picks) <= set(pool)
    measured = list(latencies)
    index = choose_next(arch_features("nb201", measured, target, profile), np.array([latencies[a] for a in measured]),
                        arch_features("nb201", pool, target, profile), 4, seed=0)
    assert picks == [pool[i] for i in index]
