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
    ("+prune.bandwidth=0.1", "prune 'dominated_throughput' takes no option bandwidth, did you mean prune.band? (takes: band, degenerate_fraction, error_band, error_quantile, fidelity, margin, "),
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


def _one_error_line(tmp_path, capsys, overrides: list[str]) -> str:
    """The one line `nasutil-search OVERRIDES` ends with (exit code 2), without its program prefix."""
    assert main([*overrides, f"hydra.run.dir={tmp_path}", *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nasutil-search: error: "), err
    return err[0].removeprefix("nasutil-search: error: ")


@pytest.mark.parametrize("overrides, message", [
    (["+evaluator.timeout=3"], ("evaluator 'auto' takes no option timeout, did you mean evaluator.timeout_s? "
                                "(takes: batch_size, counters, device, dtype, measure, mode, settle, timeout_s)")),
    (["+storage.heartbeat=3"], ("storage 'sqlite' takes no option heartbeat, did you mean "
                                "storage.heartbeat_interval? (takes: connect_timeout_s, grace_period, "
                                "heartbeat_interval, max_retry, url)")),
    (["+sampler.n_startup=3"], ("sampler 'tpe' takes no option n_startup, did you mean sampler.n_startup_trials? "
                                "(takes: consider_endpoints, ")),
    (["early_stopping=median", "+early_stopping.n_startup=3"],
     "early_stopping 'median' takes no option n_startup, did you mean early_stopping.n_startup_trials? (takes: "),
    (["halving=accuracy", "+halving.reduction=3"],
     "halving 'accuracy' takes no option reduction, did you mean halving.reduction_factor? (takes: "),
    (["+trainer.datasets=x"], ("trainer 'tabular' takes no option datasets, did you mean trainer.dataset? "
                               "(takes: dataset, fidelities)")),
    (["+prune.bandwidth=0.1", "+prune.marginn=0"],
     ("prune 'dominated_throughput' takes no option bandwidth, marginn, did you mean prune.band for bandwidth "
      "and prune.margin for marginn? (takes: ")),
    (["+predictor.profil=h200"], "predictor 'auto' takes no option profil, did you mean profile? (takes: profile)"),
    (["+trainer.zzz=1"], "trainer 'tabular' takes no option zzz (takes: dataset, fidelities)"),
])
def test_an_option_a_part_does_not_take_is_named_with_the_closest_it_takes(tmp_path, capsys, overrides, message):
    """`+evaluator.timeout=3` was answered with every option the evaluator takes and "they come with the option:
    start from one without them, such as evaluator=none", an option that has them all: a near miss is named,
    in every group, and where none is close the options are listed alone."""
    line = _one_error_line(tmp_path, capsys, overrides)
    assert line.startswith(message), line
    assert "come with" not in line and "start from" not in line, line


@pytest.mark.parametrize("overrides, message", [
    (["+evaluator.table=nb201_h200"], ("evaluator 'auto' takes no option table (takes: batch_size, counters, "
                                       "device, dtype, measure, mode, settle, timeout_s; it comes with evaluator=table)")),
    (["+trainer.epochs=3"], ("trainer 'tabular' takes no option epochs (takes: dataset, fidelities; it comes with "
                             "trainer=codes or trainer=torch)")),
    (["+prune.quantile=0.3", "+prune.threshold=0.1", "+prune.bogus=1"],
     ("prune 'dominated_throughput' takes no option bogus, quantile, threshold (takes: band, degenerate_fraction, "
      "error_band, error_quantile, fidelity, margin, min_neighbours, rung_band, rung_min_neighbours, throughput_error, "
      "top_band, warmup_trials; quantile "
      "comes with prune=utilization_quantile; threshold comes with prune=utilization_threshold)")),
    (["evaluator._target_=nasutil.search.measurer.TableMeasurer"],
     ("evaluator._target_=nasutil.search.measurer.TableMeasurer takes no option counters, device, measure, "
      "settle, timeout_s (takes: batch_size, dtype, mode, table; they come with evaluator=auto: start from one without "
      "them, such as evaluator=table)")),
    (["storage._target_=nasutil.search.storage.journal_storage"],
     ("storage._target_=nasutil.search.storage.journal_storage takes no option heartbeat_interval, max_retry, url "
      "(takes: grace_period, path; they come with storage=sqlite: start from one without them, such as "
      "storage=journal)")),
])
def test_an_option_another_option_has_is_named_with_that_option(tmp_path, capsys, overrides, message):
    """An option that a shipped option of the group has is no typo: the error names that option, the one that
    reads it, or (set over a class of one's own, `_target_`) the one it came with and one without it to start
    from; the options of evaluator and storage, which carry no name, once read as a class of the user's own."""
    assert _one_error_line(tmp_path, capsys, overrides) == message


def test_an_option_a_part_does_not_take_is_named_from_python_too():
    """Outside a run no choice is recorded: the closest name is still given, and the options that have a key."""
    from nasutil.errors import NasutilError
    from nasutil.search.config import instantiate_group

    node = {"_target_": "nasutil.search.measurer.optional_measurer", "timeout": 3, "table": "nb201_h200"}
    with pytest.raises(NasutilError) as error:
        instantiate_group(node, "evaluator")
    assert str(error.value) == ("evaluator 'nasutil.search.measurer.optional_measurer' takes no option table, "
                                "timeout, did you mean evaluator.timeout_s for timeout? (takes: batch_size, "
                                "counters, device, dtype, measure, mode, settle, timeout_s; table comes with "
                                "evaluator=table)")
