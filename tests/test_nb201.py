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


def _count_ops(fn):
    """The aten ops `fn` dispatches, by name (forward and backward)."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func.overloadpacket.__name__)] += 1
            return func(*args, **(kwargs or {}))

    with Count() as counter:
        fn()
    return counter.ops


def _computing_every_edge(model):
    """A copy of `model` whose cells sum every edge's output from Python's 0 in training too, as the reference
    networks do: what `training_node_sum` is held to."""
    import copy
    import types

    def every_edge(cell, x):
        nodes = [x]
        for i in range(1, len(cell._into)):
            nodes.append(sum(cell.edges[f"{i}<-{j}"](nodes[j]) for j in range(i)))
        return nodes[-1]

    every = copy.deepcopy(model)
    for module in every.modules():
        if hasattr(module, "_into"):
            module.forward = types.MethodType(every_edge, module)
    return every


@pytest.mark.parametrize("space_name", ["nb201", "cell"])
def test_a_training_cell_leaves_its_zero_edges_out_and_computes_the_same(space_name):
    """Training skips the `none` edges' multiplies (and Python's 0 + the first term), and gets the same output
    and gradients, bit for bit, as computing every edge, which eval mode still does (the measured networks)."""
    space = get_space(space_name)
    arch = space.parse("|none~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~1|avg_pool_3x3~2|")
    torch.manual_seed(0)
    lean = space.build(arch, num_classes=10, input_size=8).train()
    every = _computing_every_edge(lean)
    x = torch.randn(4, 3, 8, 8)

    def step(model):
        model.zero_grad()
        out = model(x)
        out.square().sum().backward()
        return out

    ops_lean, ops_every = _count_ops(lambda: step(lean)), _count_ops(lambda: step(every))
    assert torch.equal(step(lean), step(every))
    for (name, a), b in zip(lean.named_parameters(), every.parameters()):
        assert torch.equal(a.grad, b.grad), name
    assert ops_lean["mul"] < ops_every["mul"]  # no zero multiplies
    assert sum(ops_lean.values()) < sum(ops_every.values())
    lean.eval(), every.eval()  # eval computes every edge, as the reference network does
    assert _count_ops(lambda: lean(x)) == _count_ops(lambda: every(x))


def test_a_cell_whose_every_edge_into_a_node_is_zero_still_trains():
    space = get_space("nb201")
    arch = space.parse("|none~0|+|none~0|none~1|+|skip_connect~0|nor_conv_1x1~1|avg_pool_3x3~2|")
    model = space.build(arch, num_classes=10, input_size=8).train()
    out = model(torch.randn(2, 3, 8, 8))
    out.sum().backward()
    assert out.shape == (2, 10) and torch.isfinite(out).all()


def test_training_past_zero_edges_leaves_dead_weights_alone_and_trains_the_same_network():
    """A weight whose every path to the output runs through a `none` edge gets no gradient while training
    (computing every edge gave it zeros, and weight decay then shrank it): the step leaves it as it is, and the
    network computes the same, bit for bit, as one trained computing every edge."""
    from nasutil.colocate.training_step import TrainingStep, cosine_rates

    space = get_space("nb201")
    # node 1 and node 2 reach the output only through none edges: their convolutions are dead
    arch = space.parse("|nor_conv_3x3~0|+|none~0|nor_conv_1x1~1|+|skip_connect~0|none~1|none~2|")
    torch.manual_seed(0)
    lean = space.build(arch, num_classes=10, input_size=8)
    every = _computing_every_edge(lean)
    dead = lean.cells[0].edges["1<-0"][1].weight
    before = dead.detach().clone()
    x, y = torch.randn(48, 3, 8, 8), torch.randint(0, 10, (48,))
    units = [TrainingStep(m, lambda t: t, x, y, 16, cosine_rates(0.05, 3), 0.9, 5e-4, None, graph=False)
             for m in (lean, every)]
    for step in range(3):
        for unit in units:
            unit.run(step, torch.arange(16) + 16 * step)
    assert torch.equal(dead, before)  # left alone
    assert not torch.equal(every.cells[0].edges["1<-0"][1].weight, before)  # weight decay moved it there
    assert torch.equal(lean.classifier.weight, every.classifier.weight)
    lean.eval(), every.eval()
    assert torch.equal(lean(x), every(x))
