"""The Python API refuses bad input in one readable line (a NasutilError), as the command line does: each case
below once went through as it was or failed deep inside another library."""

from __future__ import annotations

import numpy as np
import pytest

from nasutil.errors import NasutilError

CELL = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"


@pytest.mark.parametrize("batch_size", [float("nan"), 2.5, True, "4", 0])
def test_a_measurement_needs_a_whole_batch_size(batch_size):
    """nan and 2.5 were kept, and each measurement then failed inside torch.randn."""
    from nasutil.evaluator import MeasureConfig

    with pytest.raises(NasutilError, match="batch size must be a whole number from 1 to 65536"):
        MeasureConfig(device="cpu", batch_size=batch_size)


@pytest.mark.parametrize("settings, message", [
    ({"batch_size": 10**20}, "batch size must be a whole number from 1 to 65536"),
    ({"repeats": 10**20}, "repeats must be a whole number from 2 to 10,000"),
    ({"warmup": 10**9}, "warmup must be a whole number from 0 to 10,000"),
    ({"max_iters_per_window": 10**30}, "max_iters_per_window must be a whole number from 1 to 1,000,000"),
    ({"input_size": 10**20}, "input size must be a whole number from 1 to 8192"),
])
def test_a_measurement_has_bounds_that_keep_it_to_minutes(settings, message):
    """A batch of 10**20 overflowed inside torch (exit 1, the reason only in the table), and 10**20 windows ran
    until the worker's time limit: both are refused before a worker starts."""
    from nasutil.evaluator import Evaluator, MeasureConfig

    with pytest.raises(NasutilError, match=message):
        MeasureConfig(device="cpu", **settings)
    with pytest.raises(NasutilError, match="workers must be a whole number from 1 to 256"):
        Evaluator(MeasureConfig(device="cpu"), workers=10**20)  # once a list of 10**20 workers: OverflowError


def test_a_numpy_batch_size_is_a_whole_number():
    from nasutil.evaluator import MeasureConfig

    assert MeasureConfig(device="cpu", batch_size=np.int64(4)).batch_size == 4


def test_a_prediction_for_another_device_than_the_profiles_is_refused():
    """An unknown device name once got the H200's figures under its own name, marked validated."""
    from nasutil.predictor import PredictTarget, predict_many

    h200 = predict_many("nb201", [CELL], PredictTarget("NVIDIA H200"))[0]
    assert predict_many("nb201", [CELL], PredictTarget("H200"))[0].latency_ms == h200.latency_ms  # the same device
    with pytest.raises(NasutilError, match="predicts for NVIDIA H200, not 'Nope GPU'"):
        predict_many("nb201", [CELL], PredictTarget("Nope GPU"))


@pytest.mark.parametrize("spec", [123, None, ["nb201"]])
def test_a_space_is_named_by_text(spec):
    """123 once failed with AttributeError: 'int' object has no attribute 'strip'."""
    from nasutil import get_space

    with pytest.raises(NasutilError, match="a search-space name is text"):
        get_space(spec)


@pytest.mark.parametrize("space", ["nb201", "nb101", "darts", "mbconv", "cell"])
@pytest.mark.parametrize("num_classes", [0, -3, 2.5, True])
def test_a_network_needs_at_least_one_class(space, num_classes):
    """num_classes=0 once built a head with no outputs (and only torch's warning said so); the command
    line refuses it already."""
    from nasutil import get_space

    built = get_space(space)
    with pytest.raises(NasutilError, match="num_classes must be a whole number from 1 to 1,000,000"):
        built.build(built.sample(np.random.default_rng(0)), num_classes=num_classes)


@pytest.mark.parametrize("setting, value", [
    ("max_iters_per_window", -5), ("max_iters_per_window", 0), ("cv_threshold", float("nan")), ("cv_threshold", 0),
    ("min_window_ms", -1), ("min_window_ms", float("nan")), ("warmup", float("nan")), ("repeats", 2.5),
    ("repeats", "7"), ("counter_tolerance", float("inf")), ("counters", "no"), ("num_classes", 0)])
def test_a_measurement_refuses_timing_settings_it_cannot_time_by(setting, value):
    """max_iters_per_window=-5 once measured a negative latency, marked ok and cached; nan and strings failed
    later, inside the timing, as a failed measurement."""
    from nasutil.evaluator import MeasureConfig

    with pytest.raises(NasutilError, match=f"^{setting} must be"):
        MeasureConfig(device="cpu", **{setting: value})


@pytest.mark.parametrize("settings, message", [
    ({"timeout_s": float("inf")}, "timeout_s must be"), ({"timeout_s": float("nan")}, "timeout_s must be"),
    ({"timeout_s": -1}, "timeout_s must be"), ({"workers": 2.5}, "workers must be a whole number")])
def test_an_evaluator_refuses_a_limit_or_worker_count_it_cannot_keep(settings, message):
    """inf and nan failed inside selectors.py; -1 reported "timed out after -1 s"; 2.5 workers a TypeError."""
    from nasutil.evaluator import Evaluator, MeasureConfig

    with pytest.raises(NasutilError, match=message):
        Evaluator(MeasureConfig(device="cpu"), **settings)
    with pytest.raises(NasutilError, match="MeasureConfig"):
        Evaluator(None)


@pytest.mark.parametrize("overrides, message", [
    (["sampler=foo"], "Could not find 'sampler/foo'"), (["nonsense"], "Error parsing override 'nonsense'"),
    ("n_trials=5", "compose takes a list of overrides")])
def test_compose_refuses_bad_overrides_in_one_line(overrides, message):
    from nasutil.search.config import compose

    with pytest.raises(NasutilError, match=message) as caught:
        compose(overrides)
    assert "\n" not in str(caught.value)


def test_a_search_built_from_python_without_a_storage_says_which_to_give(tmp_path):
    """The default storage lives in the run folder, which only a run has: Hydra's own error said
    "HydraConfig was not set"."""
    from nasutil.search.build import build_search
    from nasutil.search.config import compose

    with pytest.raises(NasutilError, match="storage=url storage.url=sqlite:///study.db"):
        build_search(compose(["n_trials=5"]), tmp_path)


def test_a_search_built_from_python_reports_into_a_folder_given_as_text(tmp_path, monkeypatch):
    """A folder given as text failed in report_search (`'str' / 'str'`), and one not made yet could not be
    written; a folder that is not a path is one line."""
    from nasutil.search import build_search, report_search
    from nasutil.search.config import compose

    monkeypatch.chdir(tmp_path)
    cfg = compose(["storage=url", "storage.url=sqlite:///study.db", "n_trials=3", "predictor=analytical",
                   "plots=false", "progress=false"])
    setup = build_search(cfg, "run/here")
    try:
        counts = setup.search.run(setup.n_trials)
        summary = report_search(setup, counts, 1.0, plots=False)
    finally:
        setup.search.close()
    assert summary["counts"]["finished"] == 3 and (tmp_path / "run" / "here" / "trials.csv").is_file()
    with pytest.raises(NasutilError, match="build_search's folder is a path, got int"):
        build_search(cfg, 3)


def test_a_space_builds_from_text_and_samples_from_a_seed():
    """The Python API takes what the command line takes: `build("...")` once failed with AttributeError
    ('str' object has no attribute 'ops'), `sample(None)` with another."""
    from nasutil import get_space

    space = get_space("nb201")
    assert type(space.build(CELL)) is type(space.build(space.parse(CELL)))
    assert space.sample(7) == space.sample(np.random.default_rng(7))
    assert space.sample(None) is not None
    with pytest.raises(NasutilError, match="a numpy Generator or a seed"):
        space.sample("x")


@pytest.mark.parametrize("text", [5, b"|none~0|", None])
def test_parse_names_what_it_was_given_that_is_not_text(text):
    from nasutil import get_space

    with pytest.raises(NasutilError, match=f"got {type(text).__name__}"):
        get_space("nb201").parse(text)


def test_another_spaces_architecture_is_refused_before_building():
    from nasutil import get_space

    nb201 = get_space("nb201").parse(CELL)
    with pytest.raises(NasutilError, match="not an architecture of darts"):
        get_space("darts").build(nb201)
    with pytest.raises(NasutilError, match="builds its own architectures or their text, got dict"):
        get_space("nb201").build({"cell": CELL})


@pytest.mark.parametrize("given", ["arch string", "model"])
def test_measure_takes_candidates_and_says_so(given):
    """A torchvision model or a plain arch string once failed as "'ResNet' object has no attribute 'space'"."""
    import torch

    from nasutil.evaluator import Evaluator, MeasureConfig

    thing = CELL if given == "arch string" else torch.nn.Linear(2, 2)
    with Evaluator(MeasureConfig(device="cpu"), isolate=False) as evaluator:
        with pytest.raises(NasutilError, match="measure takes a Candidate, e.g. Candidate"):
            list(evaluator.measure_many([thing]))


def test_count_model_takes_a_network_and_says_so():
    from nasutil import get_space
    from nasutil.counting import count_model

    with pytest.raises(NasutilError, match=r"count_model takes a torch module \(an arch's network: space.build"):
        count_model(get_space("nb201").parse(CELL), input_size=32)


def test_an_evaluator_never_closed_leaves_no_worker_traceback(tmp_path):
    """Collected at exit without `close()`, its worker read the end of its pipe as an EOFError and printed the
    traceback, though every result was fine."""
    import subprocess
    import sys

    script = tmp_path / "never_closed.py"
    script.write_text(
        "from nasutil.evaluator import Candidate, Evaluator, MeasureConfig\n"
        "def once():\n"
        "    evaluator = Evaluator(MeasureConfig(device='cpu', repeats=2))\n"
        f"    return [m.status for m in evaluator.measure_many([Candidate('nb201', {CELL!r})])]\n"
        "if __name__ == '__main__':\n"
        "    print(once())\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "['ok']", done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "EOFError" not in done.stderr, done.stderr[-2000:]


def test_a_network_counted_with_the_wrong_channels_says_which_settings_to_give():
    """A grey space's network counted as RGB (the defaults) failed inside torch with a RuntimeError."""
    import torch.nn as nn

    from nasutil.counting import count_model

    grey = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten())
    assert count_model(grey, input_size=8, in_channels=1).flops_per_image > 0
    with pytest.raises(NasutilError, match="could not run the network on one 3x8x8 image .*space.in_channels"):
        count_model(grey, input_size=8)
