"""The search's config: one hardware target for predictions and measurements, `_target_` for every part,
renamed groups that keep working for a release."""

from __future__ import annotations

import csv

import pytest

from nasutil.cli.search_command import main, renamed_overrides
from nasutil.search.build import predictor_for
from nasutil.search.config import compose

FAST = ["plots=false", "progress=false", "n_trials=6"]


def test_the_target_is_declared_once_and_reaches_predictor_and_evaluator():
    cfg = compose(["target.batch_size=64", "target.mode=eager"])
    assert (cfg.predictor.batch_size, cfg.predictor.mode) == (64, "eager")
    assert (cfg.evaluator.batch_size, cfg.evaluator.mode) == (64, "eager")
    predictor, target = predictor_for(cfg)
    assert (target.device_name, target.dtype, target.batch_size, target.mode) == ("NVIDIA H200", "fp16", 64, "eager")


def test_the_cpu_evaluator_moves_the_target_with_it():
    cfg = compose(["evaluator=cpu"])
    assert cfg.evaluator.device == "cpu" and cfg.target.device == "cpu"
    assert (cfg.predictor.dtype, cfg.predictor.batch_size, cfg.predictor.mode) == ("fp32", 8, "eager")


def test_a_mismatched_target_given_on_purpose_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["predictor.batch_size=1", f"hydra.run.dir={tmp_path}", *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "different targets (batch_size 1 predicted vs 256 measured)" in err
    # predictions only: nothing measured, nothing to mix
    assert main(["predictor.batch_size=1", "evaluator=none", f"hydra.run.dir={tmp_path}", *FAST]) == 0


def test_renamed_groups_keep_working_with_a_warning(tmp_path, capsys):
    args, notes = renamed_overrides(["pruner=median", "+pruner.n_warmup_steps=1", "predictor.model=analytical",
                                     "prune=none"])
    assert args == ["early_stopping=median", "+early_stopping.n_warmup_steps=1", "predictor.kind=analytical",
                    "prune=none"]
    assert len(notes) == 2
    assert main(["pruner=median", "predictor.model=analytical", f"hydra.run.dir={tmp_path}", *FAST]) == 0
    err = capsys.readouterr().err
    assert "'pruner' is now 'early_stopping'" in err and "'predictor.model' is now 'predictor.kind'" in err
    with (tmp_path / "trials.csv").open() as f:
        assert {r["predictor"] for r in csv.DictReader(f)} == {"analytical"}


def test_a_predictor_of_your_own_is_named_by_target(tmp_path):
    target = "test_predictor_kinds.FlopsPerTeraflop"
    assert main([f"predictor._target_={target}", "~predictor.kind", "~predictor.profile",
                 f"hydra.run.dir={tmp_path}", "evaluator=none", *FAST]) == 0
    with (tmp_path / "trials.csv").open() as f:
        assert {r["predictor"] for r in csv.DictReader(f)} == {"flops_per_teraflop"}


@pytest.mark.parametrize("override, message", [
    ("+prune.bandwidth=0.1", "prune 'dominated_throughput' takes no option bandwidth (takes: band, degenerate_fraction, error_band, error_quantile, margin, "),
    ("predictor.kind=oracle", "unknown predictor 'oracle'"),
    ("+trainer.epochz=3", "trainer 'tabular' takes no option epochz"),
])
def test_a_bad_option_of_a_part_is_named(tmp_path, capsys, override, message):
    assert main([override, f"hydra.run.dir={tmp_path}", *FAST]) == 2
    assert message in capsys.readouterr().err


def test_cpu_measurements_are_not_mixed_with_gpu_predictions(tmp_path, capsys):
    assert main(["evaluator=cpu", f"hydra.run.dir={tmp_path}", *FAST]) == 2
    err = capsys.readouterr().err
    assert "measures on this machine's CPU but the predictor predicts for NVIDIA H200" in err
