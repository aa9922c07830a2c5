"""Tests of the DARTS search space: genotype parsing, canonical form, size, network and sampling."""

from __future__ import annotations

import itertools
import math

import numpy as np
import optuna
import pytest
import torch

from nasutil.errors import InvalidArchError, NasutilError
from nasutil.registry import get_space
from nasutil_search_spaces.darts import DARTS_OPS, OPS, DartsArch, DartsSpace

# DARTS_V2 (second-order search, CIFAR-10) as published with the paper.
DARTS_V2 = (
    "Genotype(normal=[('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('sep_conv_3x3', 0), ('sep_conv_3x3', 1), "
    "('sep_conv_3x3', 1), ('skip_connect', 0), ('skip_connect', 0), ('dil_conv_3x3', 2)], "
    "normal_concat=[2, 3, 4, 5], "
    "reduce=[('max_pool_3x3', 0), ('max_pool_3x3', 1), ('skip_connect', 2), ('max_pool_3x3', 1), "
    "('max_pool_3x3', 0), ('skip_connect', 2), ('skip_connect', 2), ('max_pool_3x3', 1)], "
    "reduce_concat=[2, 3, 4, 5])"
)
NORMAL_V2 = [("sep_conv_3x3", 0), ("sep_conv_3x3", 1), ("sep_conv_3x3", 0), ("sep_conv_3x3", 1),
             ("sep_conv_3x3", 1), ("skip_connect", 0), ("skip_connect", 0), ("dil_conv_3x3", 2)]
REDUCE_V2 = [("max_pool_3x3", 0), ("max_pool_3x3", 1), ("skip_connect", 2), ("max_pool_3x3", 1),
             ("max_pool_3x3", 0), ("skip_connect", 2), ("skip_connect", 2), ("max_pool_3x3", 1)]


def genotype(normal: list, reduce: list = REDUCE_V2, concat: str = "[2, 3, 4, 5]") -> str:
    return f"Genotype(normal={normal!r}, normal_concat={concat}, reduce={reduce!r}, reduce_concat=[2, 3, 4, 5])"


def with_edge(cell: list, index: int, edge: object) -> list:
    out = list(cell)
    out[index] = edge
    return out


@pytest.fixture(scope="module")
def space() -> DartsSpace:
    return DartsSpace()


def test_registry_and_defaults(space: DartsSpace) -> None:
    got = get_space("darts")
    assert isinstance(got, DartsSpace) and (got.C, got.layers) == (16, 8)
    assert space.encoding_size == 2 * 4 * 2 * (5 + 7)


def test_ops_constant() -> None:
    assert len(DARTS_OPS) == 8 and DARTS_OPS[0] == "none"
    assert OPS == DARTS_OPS[1:] and "none" not in OPS


def test_parse_darts_v2(space: DartsSpace) -> None:
    arch = space.parse(DARTS_V2)
    # Node 2 of the normal cell is written (op on 1, op on 0) in the paper; canonically it is sorted by input.
    assert arch.normal[2] == (("skip_connect", 0), ("sep_conv_3x3", 1))
    assert arch.normal[3] == (("skip_connect", 0), ("dil_conv_3x3", 2))
    assert arch.reduce[1] == (("max_pool_3x3", 1), ("skip_connect", 2))
    assert space.parse(arch.to_string()) == arch
    assert space.parse(str(arch)).to_string() == arch.to_string()


def test_parse_accepts_darts_variants(space: DartsSpace) -> None:
    ref = space.parse(DARTS_V2)
    # `range(2, 6)` is how a genotype printed by the DARTS search code spells the concat lists.
    text = DARTS_V2.replace("[2, 3, 4, 5]", "range(2, 6)")
    assert space.parse(text) == ref
    # Newlines, lists instead of tuples, and positional fields are all the same genotype.
    assert space.parse("\n" + DARTS_V2.replace(", ", ",\n    ") + "\n") == ref
    as_lists = DARTS_V2.replace("(", "[").replace(")", "]").replace("Genotype[", "Genotype(")[:-1] + ")"
    assert space.parse(as_lists) == ref
    positional = f"Genotype({NORMAL_V2!r}, [2, 3, 4, 5], {REDUCE_V2!r}, [2, 3, 4, 5])"
    assert space.parse(positional) == ref


def test_darts_v2_paper_network() -> None:
    """With C=36 and 20 cells, DARTS_V2 has the published 3.3M parameters (3,349,342 without the auxiliary head)."""
    paper = get_space("darts:C=36,layers=20")
    model = paper.build(paper.parse(DARTS_V2))
    assert sum(p.numel() for p in model.parameters()) == 3_349_342


def test_swapped_inputs_are_canonical(space: DartsSpace) -> None:
    ref = space.parse(DARTS_V2)
    swapped = list(NORMAL_V2)
    swapped[0], swapped[1] = swapped[1], swapped[0]
    swapped[6], swapped[7] = swapped[7], swapped[6]
    reduce = list(REDUCE_V2)
    reduce[2], reduce[3] = reduce[3], reduce[2]
    other = space.parse(genotype(swapped, reduce))
    assert other == ref and hash(other) == hash(ref)
    assert other.to_string() == ref.to_string()
    assert other.canonical_hash() == ref.canonical_hash()
    assert np.array_equal(other.encode(), ref.encode())
    # Constructing directly canonicalises too.
    direct = DartsArch(normal=tuple((swapped[2 * i], swapped[2 * i + 1]) for i in range(4)),
                       reduce=tuple((reduce[2 * i], reduce[2 * i + 1]) for i in range(4)))
    assert direct == ref


def test_different_genotypes_differ(space: DartsSpace) -> None:
    ref = space.parse(DARTS_V2)
    other = space.parse(genotype(with_edge(NORMAL_V2, 7, ("dil_conv_5x5", 2))))
    assert other != ref and other.to_string() != ref.to_string()
    assert not np.array_equal(other.encode(), ref.encode())


def test_size(space: DartsSpace) -> None:
    per_cell = (1 * 49) * (3 * 49) * (6 * 49) * (10 * 49)
    assert space.size() == per_cell ** 2 == (180 * 7 ** 8) ** 2


@pytest.mark.parametrize("node", range(4))
def test_size_per_node_brute_force(node: int) -> None:
    """Every ordered choice of two edges, canonicalised, gives C(node+2, 2) * 7^2 distinct nodes."""
    edges = [(op, src) for op in OPS for src in range(node + 2)]
    seen = set()
    for a, b in itertools.product(edges, repeat=2):
        if a[1] == b[1]:
            continue
        cell = [(("skip_connect", 0), ("skip_connect", 1))] * 4
        cell[node] = (a, b)
        seen.add(DartsArch(normal=tuple(cell), reduce=tuple(cell)).normal[node])
    assert len(seen) == math.comb(node + 2, 2) * len(OPS) ** 2


def test_sampled_archs_build_run_and_round_trip(space: DartsSpace) -> None:
    rng = np.random.default_rng(0)
    x = torch.zeros(2, 3, 32, 32)
    strings = set()
    for _ in range(50):
        arch = space.sample(rng)
        text = arch.to_string()
        strings.add(text)
        assert space.parse(text) == arch
        assert "\n" not in text and "none" not in text
        enc = arch.encode()
        assert enc.dtype == np.float32 and enc.shape == (space.encoding_size,)
        assert enc.sum() == 2 * 4 * 2 * 2  # one input and one op per edge slot
        model = space.build(arch).eval()
        with torch.no_grad():
            assert model(x).shape == (2, 10)
    assert len(strings) == 50


def test_sampling_is_seeded_and_covers_choices(space: DartsSpace) -> None:
    a = space.sample_many(200, seed=3)
    assert a == space.sample_many(200, seed=3)
    ops = {op for arch in a for cell in (arch.normal, arch.reduce) for node in cell for op, _ in node}
    assert ops == set(OPS)
    inputs_node3 = {src for arch in a for _, src in arch.normal[3]}
    assert inputs_node3 == set(range(5))


def test_network_structure() -> None:
    space = DartsSpace(C=8, layers=5)
    model = space.build(space.parse(DARTS_V2), num_classes=7)
    assert [cell.reduction for cell in model.cells] == [False, True, False, True, False]
    assert model.stem[0].out_channels == 24
    assert model.classifier.in_features == 4 * 8 * 4 and model.classifier.out_features == 7
    with torch.no_grad():
        assert model.eval()(torch.zeros(1, 3, 33, 33)).shape == (1, 7)  # odd sizes reduce cleanly too
    # The default network ends at 16 * C channels.
    assert DartsSpace().build(space.parse(DARTS_V2)).classifier.in_features == 256


def test_from_option() -> None:
    space = get_space("darts:C=36,layers=20")
    assert (space.C, space.layers) == (36, 20)
    assert (DartsSpace.from_option(" layers = 14 ").C, DartsSpace.from_option("layers=14").layers) == (16, 14)


@pytest.mark.parametrize("option", ["", "C", "C=", "C=x", "depth=3", "C=16,C=20", "C=36;layers=20", "C=1",
                                    "layers=0", "C=3.5", "C=100000000000000000000000000", "C=100000,layers=1000",
                                    "layers=100000", "C=1000,layers=20"])
def test_bad_options(option: str) -> None:
    with pytest.raises(NasutilError) as info:
        DartsSpace.from_option(option)
    assert "\n" not in str(info.value) and str(info.value)


def test_the_size_bound_holds_and_refuses_only_networks_too_large_to_build() -> None:
    """C=10**27 overflowed inside torch, C=100000 tried to allocate 120 GB and layers=100000 built for minutes:
    such settings are refused unbuilt, by a bound that no network of the space exceeds."""
    from nasutil_search_spaces.darts import MAX_NETWORK_PARAMS, params_bound

    for C, layers in ((2, 1), (3, 2), (16, 8), (36, 20), (8, 30)):
        space = DartsSpace(C, layers)
        for arch in space.sample_many(4, seed=C):
            assert sum(p.numel() for p in space.build(arch).parameters()) <= params_bound(C, layers)
    assert params_bound(256, 20) < MAX_NETWORK_PARAMS < params_bound(1000, 20)
    DartsSpace(256, 20)  # the paper's evaluation network made 7 times wider still fits


def test_feature_maps_too_large_at_an_input_size_are_refused_unbuilt(cli) -> None:
    """The parameters were bounded, the feature maps not: `describe darts:C=64,layers=3 --input-size 1024` ran
    a forward pass of about 2e10 values (87 GB). Refused before building, as a cell space's are; the default
    network and the paper's stay within at the sizes they are used at."""
    space = DartsSpace(64, 3)
    with torch.device("meta"):
        space.build(space.parse(DARTS_V2), input_size=512)
        with pytest.raises(NasutilError) as error:
            space.build(space.parse(DARTS_V2), input_size=1024)
        DartsSpace(16, 8).build(space.parse(DARTS_V2), input_size=1024)
        DartsSpace(36, 20).build(space.parse(DARTS_V2), input_size=224)
    assert str(error.value) == ("darts:C=64,layers=3 at input size 1024: a forward pass of one image computes about "
                                "2.2e+10 values (87 GB in fp32), over the 1.7e+10 a space's may (fewer channels or "
                                "layers, or a smaller input size)")
    result = cli("describe", "darts:C=256,layers=20", DARTS_V2, "--input-size", "1024")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr[-2000:]
    assert ("darts:C=256,layers=20 at input size 1024 makes feature maps of 1.1e+09 values (4.3 GB in fp32 for one "
            "image), over the 2.7e+08") in result.stderr


def test_suggest_with_optuna(space: DartsSpace) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    names = None
    for _ in range(5):
        trial = study.ask()
        arch = space.suggest(trial)
        assert isinstance(arch, DartsArch) and space.parse(arch.to_string()) == arch
        assert names is None or set(trial.params) == names
        names = set(trial.params)
        study.tell(trial, 0.0)
    assert len(names) == 2 * 4 * 3
    assert "normal_node3_inputs" in names and "reduce_node0_op_b" in names


def test_parse_is_deterministic(space: DartsSpace) -> None:
    results = {space.parse(DARTS_V2).to_string() for _ in range(5)}
    assert len(results) == 1
    assert space.parse(DARTS_V2) == space.parse(DARTS_V2)


BAD = {
    "empty": "",
    "blank": "   \n ",
    "truncated": DARTS_V2[:-30],
    "junk": "hello world",
    "eval-like import": "__import__('os').system('echo hi')",
    "eval-like in field": DARTS_V2.replace("normal=[", "normal=__import__('os').listdir('.') or [", 1),
    "eval-like name": "Genotype(normal=x, normal_concat=[2, 3, 4, 5], reduce=[], reduce_concat=[2, 3, 4, 5])",
    "lambda": "(lambda: 1)()",
    "attribute call": DARTS_V2.replace("Genotype(", "genotypes.Genotype(", 1),
    "wrong function": DARTS_V2.replace("Genotype(", "dict(", 1),
    "too few edges": genotype(NORMAL_V2[:6]),
    "too many edges": genotype(NORMAL_V2 + [("skip_connect", 0), ("skip_connect", 1)]),
    "odd edge count": genotype(NORMAL_V2[:7]),
    "input out of range": genotype(with_edge(NORMAL_V2, 1, ("sep_conv_3x3", 3))),
    "input out of range node 3": genotype(with_edge(NORMAL_V2, 7, ("sep_conv_3x3", 5))),
    "negative input": genotype(with_edge(NORMAL_V2, 0, ("sep_conv_3x3", -1))),
    "duplicate inputs": genotype(with_edge(NORMAL_V2, 1, ("sep_conv_5x5", 0))),
    "unknown op": genotype(with_edge(NORMAL_V2, 4, ("conv_7x1_1x7", 1))),
    "none op": genotype(with_edge(NORMAL_V2, 4, ("none", 1))),
    "none op in reduce": genotype(NORMAL_V2, with_edge(REDUCE_V2, 0, ("none", 0))),
    "bad edge shape": genotype(with_edge(NORMAL_V2, 0, ("sep_conv_3x3", 0, 1))),
    "string input": genotype(with_edge(NORMAL_V2, 0, ("sep_conv_3x3", "0"))),
    "bool input": genotype(with_edge(NORMAL_V2, 0, ("sep_conv_3x3", False))),
    "float input": genotype(with_edge(NORMAL_V2, 0, ("sep_conv_3x3", 0.0))),
    "bad concat": genotype(NORMAL_V2, concat="[2, 3, 4]"),
    "bad concat range": genotype(NORMAL_V2, concat="range(2, 5)"),
    "missing field": DARTS_V2.replace(", reduce_concat=[2, 3, 4, 5]", ""),
    "unknown field": DARTS_V2[:-1] + ", extra=[1])",
    "duplicate field": DARTS_V2[:-1] + ", normal=[])",
    "star args": "Genotype(*x)",
    "kwargs": "Genotype(**x)",
    "normal not a list": genotype("sep_conv_3x3"),
    "normal a set": DARTS_V2.replace("normal=[", "normal={", 1).replace(")], normal_concat", ")}, normal_concat", 1),
    "huge": "Genotype(normal=[" + "(" * 100_000 + ")",
    "deep nesting": "Genotype(normal=" + "[" * 1000 + "]" * 1000 + ")",
}


@pytest.mark.parametrize("text", list(BAD.values()), ids=list(BAD))
def test_bad_strings_raise_one_line(space: DartsSpace, text: str) -> None:
    with pytest.raises(InvalidArchError) as info:
        space.parse(text)
    message = str(info.value)
    assert message and "\n" not in message and len(message) < 300


def test_error_messages_say_what_is_wrong(space: DartsSpace) -> None:
    def message(text: str) -> str:
        with pytest.raises(InvalidArchError) as info:
            space.parse(text)
        return str(info.value)

    assert "none" in message(BAD["none op"]) and "supernet" in message(BAD["none op"])
    assert "node 0" in message(BAD["input out of range"]) and "3" in message(BAD["input out of range"])
    assert "twice" in message(BAD["duplicate inputs"])
    assert "conv_7x1_1x7" in message(BAD["unknown op"])
    assert "8" in message(BAD["too few edges"]) and "got 6" in message(BAD["too few edges"])
    assert "normal_concat" in message(BAD["bad concat"])
    assert "reduce" in message(BAD["none op in reduce"])


def test_eval_like_input_is_not_executed(space: DartsSpace, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr("os.system", lambda *a: calls.append(a))
    with pytest.raises(InvalidArchError):
        space.parse("__import__('os').system('echo hi')")
    with pytest.raises(InvalidArchError):
        space.parse(DARTS_V2.replace("[2, 3, 4, 5]", "__import__('os').system('x')", 1))
    assert calls == []


def test_direct_construction_validates() -> None:
    good = tuple((("skip_connect", 0), ("skip_connect", 1)) for _ in range(4))
    with pytest.raises(InvalidArchError):
        DartsArch(normal=good[:3], reduce=good)
    with pytest.raises(InvalidArchError):
        DartsArch(normal=good, reduce=((("none", 0), ("skip_connect", 1)),) + good[1:])
