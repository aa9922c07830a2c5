import numpy as np
import optuna
import pytest
import torch

from nasutil import InvalidArchError, get_space
from nasutil.counting import count_model

BEST = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


@pytest.fixture(scope="module")
def space():
    return get_space("nb201")


def test_enumerates_all_distinct_cells(space):
    archs = list(space.enumerate())
    assert len(archs) == space.size() == 15625
    assert len({a.to_string() for a in archs}) == 15625
    assert len({a.canonical_hash() for a in archs}) == 15625


def test_sampled_cells_build_run_and_round_trip(space):
    rng = np.random.default_rng(0)
    for _ in range(50):
        arch = space.sample(rng)
        assert space.parse(arch.to_string()) == arch
        model = space.build(arch).eval()
        with torch.no_grad():
            assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_every_bundled_table_cell_parses(space):
    import gzip
    import importlib.resources as res

    with res.files("nasutil.data").joinpath("nasbench201_accuracy.csv.gz").open("rb") as fh:
        lines = gzip.decompress(fh.read()).decode().splitlines()[1:]
    strings = [line.split(",")[1] for line in lines]
    assert len(strings) == 15625
    assert {space.parse(s).to_string() for s in strings} == {a.to_string() for a in space.enumerate()}


def test_encoding_is_one_hot_per_edge(space):
    enc = space.parse(BEST).encode()
    assert enc.shape == (space.encoding_size,) == (30,)
    assert enc.reshape(6, 5).sum(axis=1).tolist() == [1.0] * 6


def test_flops_and_params_of_the_largest_cell(space):
    """All-conv3x3 cell: NAS-Bench-201 lists 220.11 M multiply-adds and 1.53 M parameters for it."""
    arch = space.parse("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|")
    counts = count_model(space.build(arch), 32)
    assert counts.flops_per_image / 2 == pytest.approx(220.11e6, rel=1e-3)
    assert counts.params == pytest.approx(1.53e6, rel=5e-3)


def test_suggest_through_optuna(space):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    arch = space.suggest(trial)
    assert len(trial.params) == 6
    assert space.parse(arch.to_string()) == arch


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("   ", "empty"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|", "3 nodes"),
    ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|", "3 incoming"),
    ("|conv_7x7~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|", "unknown"),
    ("|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|", "from node 0"),
    ("|nor_conv_3x3|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|", "malformed"),
    ("nor_conv_3x3~0+a+b", "must look like"),
    ("|a~0|+|b~0|c~1|+|d~0|e~1|f~2|+|g~0|", "3 nodes"),
])
def test_bad_cells_are_rejected_in_one_line(space, text, fragment):
    with pytest.raises(InvalidArchError) as info:
        space.parse(text)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)
