"""Successive halving inside a search: the Pareto-aware cut, its rungs, a search that cuts candidates at
rungs (their training stops there, they free their place), and the settings a user can get wrong."""

from __future__ import annotations

import numpy as np
import optuna
import pytest

from nasutil.errors import NasutilError
from nasutil.search.config import shipped
from nasutil.search.halving import AccuracyHalving, ParetoHalving, crowding_distances, front_indices

MAX = ["maximize", "maximize"]


def test_fronts_by_non_dominated_sorting():
    gains = np.array([[3, 1], [1, 3], [2, 2], [1, 1], [0, 0], [2, 0.5]], dtype=float)
    assert front_indices(gains).tolist() == [0, 0, 0, 1, 2, 1]


def test_points_closer_than_a_columns_margin_are_not_told_apart():
    gains = np.array([[90.0, 0.0], [60.0, -0.02], [50.0, -0.5]])
    assert front_indices(gains).tolist() == [0, 1, 2]
    assert front_indices(gains, np.array([0.0, 0.05])).tolist() == [0, 0, 1]  # 2% slower: not dominated


def test_a_candidate_predicted_a_little_slower_is_not_cut_within_the_hardware_tolerance():
    """The predictor ranks the fastest cells poorly (on nb201 the all-skip cell, predicted 2% slower than
    the fast anchors and far less accurate at a rung, measures the fastest of all): within
    `hardware_tolerance` a predicted hardware figure does not dominate, accuracy alone cannot cut."""
    anchor, all_skip = [85.0, 491_939.0], [60.0, 482_187.0]
    exact, tolerant = ParetoHalving(3, hardware_tolerance=0.0), ParetoHalving(3, hardware_tolerance=0.05)
    for halving in (exact, tolerant):
        halving.name_objectives(["accuracy", "throughput"])
        assert halving.decide(0, 0, anchor, MAX) is None
    assert exact.decide(0, 1, all_skip, MAX) is not None
    assert tolerant.decide(0, 1, all_skip, MAX) is None
    slow = [59.0, 400_000.0]  # 18% slower and less accurate: dominated whatever the tolerance
    assert tolerant.decide(0, 2, slow, MAX) is not None
    unnamed = ParetoHalving(3, hardware_tolerance=0.05)  # objectives never named: every one compared exactly
    unnamed.decide(0, 0, anchor, MAX)
    assert unnamed.decide(0, 1, all_skip, MAX) is not None


def test_the_tolerance_applies_to_hardware_figures_in_either_direction_never_to_accuracy():
    halving = ParetoHalving(3, hardware_tolerance=0.05)
    halving.name_objectives(["latency", "accuracy"])
    directions = ["minimize", "maximize"]
    assert halving.decide(0, 0, [1.00, 85.0], directions) is None
    assert halving.decide(0, 1, [1.02, 60.0], directions) is None  # 2% slower: not told apart
    assert halving.decide(0, 2, [1.00, 84.0], directions) is None  # as fast as predicted: it may be faster
    assert halving.decide(0, 3, [1.10, 84.0], directions) is not None  # 10% slower and less accurate: dominated


@pytest.mark.parametrize("bad", [-0.1, 1.0, True, "5%", float("nan")])
def test_a_hardware_tolerance_outside_zero_to_one_is_refused(bad):
    with pytest.raises(NasutilError, match="hardware_tolerance"):
        ParetoHalving(3, hardware_tolerance=bad)


def test_rungs_follow_the_reduction_factor():
    assert ParetoHalving(3, 1 / 9).rungs == pytest.approx((1 / 9, 1 / 3), abs=1e-6)
    assert ParetoHalving(4, 1 / 16).rungs == pytest.approx((1 / 16, 1 / 4), abs=1e-6)
    assert ParetoHalving(2, 0.3).rungs == pytest.approx((0.3, 0.6), abs=1e-6)


def test_a_fast_slightly_less_accurate_candidate_is_not_cut():
    """Eight accurate, slow candidates at a rung; a ninth is 2 points less accurate but twice as fast:
    plain ASHA on accuracy cuts it, the Pareto-aware cut keeps it (it is on the first front)."""
    fast = [88.0, 2000.0]
    assert ParetoHalving(3).decide(0, 0, fast, MAX) is None  # alone at its rung
    pareto, accuracy = ParetoHalving(3), AccuracyHalving(3)
    for halving in (pareto, accuracy):
        for n in range(8):
            halving.decide(0, n, [90.0 + 0.1 * n, 1000.0 - n], MAX)
    assert pareto.decide(0, 8, fast, MAX) is None
    cut = accuracy.decide(0, 8, fast, MAX)
    assert cut is not None and cut.rank == 8 and cut.kept == 3


def test_a_dominated_candidate_is_cut_and_says_why():
    halving = ParetoHalving(3)
    for n in range(6):
        halving.decide(0, n, [90.0 + n, 1000.0 + 10 * n], MAX)
    cut = halving.decide(0, 6, [80.0, 900.0], MAX)  # dominated by all six
    assert cut is not None and cut.rank == 6 and cut.competitors == 7 and cut.kept == 2
    assert "rung 1" in str(cut) and "0.111" in str(cut)


def test_minimised_objectives_rank_the_other_way():
    halving = ParetoHalving(3)
    for n in range(6):
        halving.decide(0, n, [90.0, 1.0 + n], ["maximize", "minimize"])  # latency 1..6 ms
    assert halving.decide(0, 6, [90.0, 0.5], ["maximize", "minimize"]) is None  # the fastest
    assert halving.decide(0, 7, [90.0, 9.0], ["maximize", "minimize"]) is not None  # the slowest


def test_crowding_distance_puts_a_fronts_ends_first_and_spreads_the_rest_by_their_neighbours():
    gains = np.array([[0, 4], [1, 3], [1.5, 2.5], [3, 1], [4, 0], [0, 0]], dtype=float)
    fronts = front_indices(gains)
    assert fronts.tolist() == [0, 0, 0, 0, 0, 1]
    distances = crowding_distances(gains, fronts)
    assert np.isinf(distances[[0, 4, 5]]).all()  # the first front's ends; a front of one
    assert distances[1] == pytest.approx(1.5 / 4 * 2) and distances[2] == pytest.approx(2 / 4 * 2)
    assert distances[3] == pytest.approx(2.5 / 4 * 2)


def _whole_front() -> list[list[float]]:
    """Nine candidates on one front, more accurate the slower, the middle ones crowded together."""
    return [[80.0, 2000.0], [81.0, 1900.0], [81.2, 1890.0], [81.4, 1880.0], [81.6, 1870.0],
            [81.8, 1860.0], [85.0, 1500.0], [88.0, 1200.0], [90.0, 1000.0]]


def test_nsga2_lets_a_third_go_on_where_a_whole_front_would():
    """All nine lie on the first front: `fronts` lets every one go on; `nsga2` keeps the front's two ends
    and the one crowding its neighbours least (n // 3 = 3 of 9) and cuts the crowded middle."""
    order = [0, 8, 6, 1, 2, 3, 4, 5, 7]  # arrivals: the ends first, then the least crowded, the crowded ones last
    wholes, nsga2 = ParetoHalving(3), ParetoHalving(3, select="nsga2")
    cuts = {name: [halving.decide(0, n, _whole_front()[n], MAX) is not None for n in order]
            for name, halving in (("fronts", wholes), ("nsga2", nsga2))}
    assert not any(cuts["fronts"])
    assert cuts["nsga2"][:2] == [False, False]  # the ends, always
    kept = [n for n, cut in zip(order, cuts["nsga2"]) if not cut]
    assert len(kept) <= 4 and {0, 8} <= set(kept) and not {2, 3, 4, 5} & set(kept)


def test_whole_fronts_go_on_by_default_and_nsga2_is_asked_for():
    assert ParetoHalving(3).select == "fronts" and "with whole fronts" in ParetoHalving(3).describe()
    assert "crowding distance" in ParetoHalving(3, select="nsga2").describe()
    assert shipped("halving", "pareto").select == "fronts"
    assert AccuracyHalving(3).select == "fronts"


@pytest.mark.parametrize("settings", [dict(reduction_factor=1), dict(min_fraction=0), dict(min_fraction=1.5),
                                      dict(reduction_factor="three"), dict(min_fraction=float("nan")),
                                      dict(select="crowding")])
def test_bad_halving_settings_are_user_errors(settings):
    with pytest.raises(NasutilError, match="halving"):
        ParetoHalving(**settings)


def _search(tmp_path, *extra: str) -> tuple[int, optuna.Study]:
    from nasutil.cli.search_command import main

    run_dir = tmp_path / "run"
    args = ["study_name=halving", f"hydra.run.dir={run_dir}", "n_trials=12", "predictor=analytical", "plots=false",
            "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=3", "trainer.batch_size=64",
            "trainer.max_batches_per_epoch=9", "trainer.threads=1", "progress=false", "halving=pareto", *extra]
    code = main(args)
    return code, optuna.load_study(study_name="halving", storage=f"sqlite:///{run_dir / 'study.db'}")


def test_a_search_cuts_candidates_at_rungs(tmp_path):
    code, study = _search(tmp_path, "trainer.population=3")
    assert code == 0
    trials = study.trials
    assert [t.state for t in trials].count(optuna.trial.TrialState.FAIL) == 0
    cut = [t for t in trials if str(t.user_attrs.get("prune_policy", "")).startswith("halving:pareto")]
    trained = [t for t in trials if "accuracy" in t.user_attrs and "duplicate_of" not in t.user_attrs]
    assert cut and trained and len(cut) + len(trained) <= 12
    for t in cut:  # stopped at a rung: a third or a ninth of its 27 steps, with the accuracy there
        assert t.state == optuna.trial.TrialState.PRUNED and t.user_attrs["prune_stage"] == "during_training"
        assert t.user_attrs["training_epochs"] in (pytest.approx(1 / 3, abs=1e-3), pytest.approx(1.0, abs=1e-3))
        assert "cut at rung" in t.user_attrs["prune_reason"]
        assert set(t.user_attrs["rungs"]) <= {"0.111111", "0.333333"}
    assert all(set(t.user_attrs["rungs"]) == {"0.111111", "0.333333"} for t in trained)


def test_a_resumed_search_ranks_against_the_rungs_it_stored(tmp_path):
    from nasutil.search.build import build_search
    from nasutil.search.config import compose

    code, study = _search(tmp_path)
    assert code == 0
    cfg = compose(["study_name=halving", f"hydra.run.dir={tmp_path / 'run'}", "predictor=analytical",
                       "prune=none", "trainer=torch", "trainer.dataset=digits", "trainer.epochs=3",
                       "trainer.batch_size=64", "trainer.max_batches_per_epoch=9", "trainer.threads=1",
                       "halving=pareto", f"storage.url=sqlite:///{tmp_path / 'run' / 'study.db'}"])
    setup = build_search(cfg, tmp_path / "run")
    stored = sum(len(t.user_attrs.get("rungs") or {}) for t in study.trials)
    assert stored and sum(len(board) for board in setup.search.halving._board) == stored


def test_halving_needs_a_trainer_that_validates_part_of_the_way(tmp_path, capsys):
    from nasutil.cli.search_command import main

    assert main([f"hydra.run.dir={tmp_path}", "halving=pareto", "plots=false", "progress=false", "n_trials=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "halving=pareto" in err and "trainer=torch" in err and "\n" not in err


def test_the_study_name_of_a_search_without_halving_is_unchanged():
    from nasutil.search.config import halving_suffix

    assert halving_suffix({"name": "none"}) == ""
    assert halving_suffix({"name": "pareto", "reduction_factor": 3}).startswith("-h")


def test_a_pareto_study_named_before_select_existed_keeps_its_name():
    """`select: fronts` is the rule such studies ran: the name leaves it out; `nsga2` names another study."""
    from nasutil.search.config import compose, halving_suffix, plain

    node = {k: v for k, v in plain(compose(["halving=pareto"]).halving).items() if k != "select"}
    assert halving_suffix({**node, "select": "fronts"}) == halving_suffix(node)
    assert halving_suffix({**node, "select": "nsga2"}) != halving_suffix(node)
    assert halving_suffix({**node, "_target_": "my.Halving", "select": "fronts"}) != halving_suffix(
        {**node, "_target_": "my.Halving"})  # a class of the user's own may mean anything by it


def test_trainer_settings_of_a_population():
    trainer = shipped("trainer", "torch", dataset="digits", population=8)
    assert trainer.ahead == 2 and trainer.concurrent_trials == 10 and trainer.reports_rungs
    assert shipped("trainer", "torch", dataset="digits", population=8, ahead=0).concurrent_trials == 8
    assert trainer.host_turns == 4 and trainer.capture == "beside" and trainer.warm_up_steps == 3
    assert trainer.eval_batch == 1024 and trainer.finish_together is False
    for bad in (dict(finish_together="yes"), dict(finish_together=1), dict(ahead=-1), dict(ahead="many"), dict(memory_budget_gb=float("nan")), dict(compile="maybe"),
                dict(host_turns=0), dict(host_turns=1.5), dict(host_turns=True), dict(capture="later"),
                dict(round_size=0), dict(round_size="all"), dict(lead_rounds=0), dict(lead_rounds=2.5),
                dict(warm_up_steps=0), dict(warm_up_steps=1.5), dict(warm_up_steps=True), dict(eval_batch=0),
                dict(eval_batch=512.0), dict(eval_batch=True)):
        with pytest.raises(NasutilError):
            shipped("trainer", "torch", dataset="digits", population=8, **bad)


def test_a_validation_counts_the_same_in_forwards_of_any_size():
    """`trainer.eval_batch`: fewer, larger forwards (or more, smaller ones) count the same correct predictions
    on the validation split (CPU, digits: float32, so every size computes the same logits up to rounding)."""
    import torch

    from nasutil.registry import get_space

    trainer = shipped("trainer", "torch", dataset="digits", device="cpu")
    data = trainer._load()
    space = get_space("nb201")
    torch.manual_seed(0)
    model = space.build(space.parse("|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|avg_pool_3x3~0|"
                                    "nor_conv_3x3~1|skip_connect~2|"), num_classes=data["num_classes"],
                        input_size=data["input_size"])
    forwards: list[int] = []
    model.register_forward_hook(lambda module, args, out: forwards.append(len(args[0])))
    counts, images = set(), len(data["valid"][1])
    for size in (7, 64, 1024, 100_000):
        trainer.eval_batch = size
        forwards.clear()
        counts.add(int(trainer._correct(model, data["valid"], space.in_channels)))
        assert len(forwards) == -(-images // size) and max(forwards) == min(size, images)  # forwards of that size
    assert len(counts) == 1 and 0 < counts.pop() <= images
    assert model.training  # handed back in training mode, as the step expects


class _RungRecorder:
    """Records each rung's validation accuracy and each epoch's; cuts nothing."""

    def __init__(self, rungs) -> None:
        self.rungs, self.at_rungs, self.at_ends = tuple(rungs), [], []

    def report_rung(self, fraction: float, accuracy: float) -> None:
        self.at_rungs.append(accuracy)

    def report(self, step: int, accuracy: float) -> None:
        self.at_ends.append(accuracy)


@pytest.mark.parametrize("population", [1, 2])
def test_a_rung_validates_on_its_share_of_the_split_and_an_epochs_end_on_all_of_it(population):
    """`trainer.rung_valid_images=N`: a rung's accuracy is a count over the split's first N images (a multiple of
    100/N), an epoch's end over the whole split, one at a time and in a population alike (CPU, digits)."""
    from nasutil.registry import get_space

    trainer = shipped("trainer", "torch", dataset="digits", device="cpu", epochs=1, batch_size=16,
                      rung_valid_images=7, population=population)
    trainer.check("nb201")
    images = len(trainer._load()["valid"][1])
    assert images > 7 and "rungs validated on 7 images" in trainer.describe()
    reporter = _RungRecorder((1 / 9, 1 / 3))
    result = trainer.train(get_space("nb201"), "|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|+|avg_pool_3x3~0|"
                                               "skip_connect~1|nor_conv_3x3~2|", reporter, trial_number=3)
    assert len(reporter.at_rungs) == 2 and len(reporter.at_ends) == 1
    assert all(abs(a * 7 / 100 - round(a * 7 / 100)) < 1e-9 for a in reporter.at_rungs)
    assert any(0 < a < 100 for a in reporter.at_rungs)  # a count of 7 that no count over the whole split equals
    assert abs(reporter.at_ends[0] * images / 100 - round(reporter.at_ends[0] * images / 100)) < 1e-9
    assert result.accuracy == reporter.at_ends[0]  # the trial's accuracy is the whole split's


def test_rung_validation_images_are_checked():
    for bad in (0, -3, 2.5, True, "all"):
        with pytest.raises(NasutilError, match="trainer.rung_valid_images must be"):
            shipped("trainer", "torch", dataset="digits", rung_valid_images=bad)
    trainer = shipped("trainer", "torch", dataset="digits", device="cpu", rung_valid_images=100_000)
    with pytest.raises(NasutilError, match="is more than the 144 validation images of digits"):
        trainer.check("nb201")
    whole = shipped("trainer", "torch", dataset="digits", device="cpu")
    data = whole._load()
    assert data["valid_rung"] is data["valid"]  # no second copy of the split where rungs read all of it


def test_a_population_gets_its_host_turns_from_the_trainer():
    trainer = shipped("trainer", "torch", dataset="digits", population=4, host_turns=3, round_size=2,
                      lead_rounds=5, device="cpu")
    trainer._load()
    assert trainer._population.host_turns == 3 and trainer._population.round_size == 2
    assert trainer._population.lead_rounds == 5 and not trainer._population.finish_together
    trainer.closing()  # the search asks no more: the population hears it
    assert trainer._population._closing
    together = shipped("trainer", "torch", dataset="digits", population=4, finish_together=True, device="cpu")
    together._load()
    assert together._population.finish_together


def test_a_bad_capture_setting_is_one_line_and_exit_2(tmp_path, capsys):
    from nasutil.cli.search_command import main

    code = main([f"hydra.run.dir={tmp_path}", "trainer=torch", "trainer.dataset=digits", "trainer.capture=later",
                 "n_trials=1", "plots=false", "progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "trainer.capture must be one of beside, alone" in err[0]


def test_compile_auto_stays_off_where_it_cannot_pay():
    trainer = shipped("trainer", "torch", dataset="digits", epochs=1)
    trainer._load()
    assert trainer.compile is False and "off (auto" in trainer.describe()
