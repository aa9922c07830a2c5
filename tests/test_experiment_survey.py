"""The CNN survey's README quotes what its committed measurements say, and those measurements are sane."""

import re
from pathlib import Path

import pandas as pd
import pytest

from conftest import load_script

SURVEY = Path(__file__).resolve().parents[1] / "experiments" / "survey"
RESULTS = SURVEY / "results"


@pytest.fixture(scope="module")
def analyze():
    return load_script(SURVEY / "analyze.py", "survey_analyze")


@pytest.fixture(scope="module")
def readme() -> str:
    return " ".join((SURVEY / "README.md").read_text().split())  # line breaks do not matter


@pytest.fixture(scope="module")
def survey() -> pd.DataFrame:
    return pd.read_csv(RESULTS / "survey.csv")


def test_readme_quotes_every_headline_figure(analyze, readme):
    numbers = analyze.headline(RESULTS)
    assert len(numbers) > 40
    for key, text in numbers.items():
        quoted = re.escape(" ".join(text.split()))
        # not as the tail of a longer number ("7.0%" must not match "17.0%")
        assert re.search(rf"(?<![\d.,]){quoted}", readme), f"README does not say {key}: {text!r}"


def test_readme_table_matches_the_measurements(analyze):
    """Every measured cell of the README's table; the last column (published top-1) needs torchvision."""
    text = (SURVEY / "README.md").read_text()
    table = analyze.markdown_table(analyze.summary(RESULTS, with_accuracy=False))
    rows = table.splitlines()
    assert len(rows) == 2 + 35
    for row in rows[2:]:
        measured = row[: row.rstrip(" |").rindex("|") + 1]  # all but the top-1 cell
        assert measured in text, f"README table lacks {measured!r}"


def test_survey_grid_is_complete_and_sane(survey):
    assert survey["arch"].nunique() == 35
    assert (survey["status"] == "ok").all()
    fp16 = survey[survey["dtype"] == "fp16"]
    assert len(fp16) == 35 * 4 * 2
    assert set(fp16.groupby("arch").size()) == {8}
    assert survey[survey["dtype"] == "bf16"]["arch"].nunique() == 5
    assert ((survey["utilization"] > 0) & (survey["utilization"] < 1)).all()
    # utilization = FLOPs of the batch / latency / peak
    achieved = survey["flops_per_image"] * survey["batch_size"] / (survey["latency_ms"] * 1e-3) / 1e12
    assert ((achieved / survey["achieved_tflops"] - 1).abs() < 1e-6).all()
    assert ((survey["achieved_tflops"] / survey["peak_tflops"] / survey["utilization"] - 1).abs() < 1e-6).all()
    # GPM counters are percentages
    counters = [c for c in survey.columns if c.startswith("counter_")]
    assert ((survey[counters] >= 0) & (survey[counters] <= 100)).all().all()


def test_cuda_graph_is_not_slower_than_eager_at_batch_1(survey):
    b1 = survey[(survey["batch_size"] == 1) & (survey["dtype"] == "fp16")].pivot(
        index="arch", columns="mode", values="latency_ms")
    assert (b1["cudagraph"] <= b1["eager"]).mean() >= 0.9


def test_compile_and_layer_files_cover_their_models(analyze):
    compiled = pd.read_csv(RESULTS / "survey_compile.csv")
    assert sorted(compiled["arch"]) == sorted(["resnet50", "efficientnet_b0", "mobilenet_v3_large", "convnext_tiny",
                                               "regnet_y_1_6gf"])
    assert (compiled["status"] == "ok").all() and (compiled["batch_size"] == 256).all()
    for arch in analyze.LAYER_MODELS:
        layers = analyze.load_layers(RESULTS, arch)
        assert (layers["time_ms"] >= 0).all() and layers["time_ms"].sum() > 0
        assert (layers["utilization"].dropna() < 1).all()
        assert "other" not in set(layers.loc[layers["time_ms"] > 0, "group"])


def test_families_and_layer_groups(analyze):
    assert analyze.family("wide_resnet50_2") == "ResNeXt/WideResNet"
    assert analyze.family("resnet18") == "ResNet"
    assert analyze.family("mobilenetv3_large_100") == "MobileNet"
    assert analyze.family("ghostnet_100") == "other"
    assert analyze.layer_group("features.2.0.block.2.fc1", "conv1x1") == "squeeze-excite"
    assert analyze.layer_group("avgpool", "pool") == "pooling"  # a network's final pooling is no SE block
    assert analyze.layer_group("layer1.0.conv1", "conv1x1") == "conv 1×1"


def test_converged_counters_agree_with_their_reference():
    counters = pd.read_csv(RESULTS / "counters_b256.csv")
    survey = pd.read_csv(RESULTS / "survey.csv")
    assert set(counters["arch"]) == set(survey["arch"]) and counters["counters_converged"].all()
    assert (counters["counter_window_ms"] >= 500).all()
    referenced = counters.dropna(subset=["reference_sm_activity"])
    assert len(referenced) == 8
    for key in ("sm_activity", "tensor_activity"):
        assert ((referenced[f"counter_{key}"] - referenced[f"reference_{key}"]).abs() <= 2.0).all()
