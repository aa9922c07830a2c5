"""The co-location experiment's README quotes what its committed measurements say, and they are sane."""

import re
from pathlib import Path

import pytest

from conftest import load_script

HERE = Path(__file__).resolve().parents[1] / "experiments" / "colocation"
RESULTS = HERE / "results"


@pytest.fixture(scope="module")
def analyze():
    return load_script(HERE / "analyze.py", "colocation_analyze")


@pytest.fixture(scope="module")
def readme() -> str:
    return " ".join((HERE / "README.md").read_text().split())


def test_readme_quotes_every_headline_figure(analyze, readme):
    numbers = analyze.headline(RESULTS)
    assert len(numbers) >= 16
    for key, text in numbers.items():
        assert re.search(rf"(?<![\d.,]){re.escape(text)}", readme), f"README does not say {key}: {text!r}"


def test_readme_holds_the_tables(analyze):
    text = (HERE / "README.md").read_text()
    for row in analyze.markdown_tables(RESULTS).splitlines():
        assert row in text, f"README lacks {row!r}"


def test_measurements_are_complete_and_sane(analyze):
    df = analyze.opportunity(RESULTS)
    assert set(df["group"]) == {"nb201", "torchvision"}
    assert (df.groupby("group").size() == len(analyze.BATCHES)).all()
    assert ((df["utilization"] > 0) & (df["utilization"] < 1)).all()
    assert (df["speedup"] - df["sequential_ms"] / df["streams_ms"]).abs().max() < 1e-9
    images = df["networks"] * df["batch"] / (df["streams_ms"] * 1e-3)
    assert ((images / df["streams_images_per_s"] - 1).abs() < 1e-9).all()
    assert analyze.reference_gap(df) < 0.03  # both ways agree with the script's own capture and clock
    assert df.loc[df["group"] == "nb201", "fused_ms"].notna().all()
    assert df.loc[df["group"] == "torchvision", "fused_ms"].isna().all()  # fused does not apply to them


def test_packing_by_prediction_beats_random_groups(analyze):
    packing = analyze.packing(RESULTS)
    assert list(packing.index) == [1, 32]
    assert (packing["speedup_over_random_best"] > 1).all()


def test_tighter_slos_widen_the_gap(analyze):
    gaps = analyze.slo_gaps(analyze.opportunity(RESULTS)).dropna(subset=["gap"])
    for _, part in gaps.groupby("group"):
        ordered = part.sort_values("slo_ms")["gap"].tolist()
        assert ordered == sorted(ordered, reverse=True)
