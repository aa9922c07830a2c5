"""NAS-Bench-101 space: validity rules, strings, graph hash, encoding, sampling, suggest and network."""

from __future__ import annotations

import itertools

import numpy as np
import optuna
import pytest
import torch

from nasutil.errors import InvalidArchError, NotEnumerableError
from nasutil.registry import get_space
from nasutil_search_spaces.nb101 import (
    ENCODING_SIZE,
    MAX_EDGES,
    OPS,
    NasBench101Space,
    NB101Arch,
    NB101Cell,
    NB101Network,
    graph_hash,
    prune,
    vertex_channels,
)

C3, C1, MP = OPS
# The example cell of the NAS-Bench-101 README, with its published parameter count.
README_MATRIX = [[0, 1, 0, 0, 1, 1, 0], [0, 0, 1, 0, 0, 0, 0], [0, 0, 0, 1, 0, 0, 1], [0, 0, 0, 0, 0, 1, 0],
                 [0, 0, 0, 0, 0, 1, 0], [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 0, 0]]
README_OPS = ["input", C3, MP, C3, C3, C1, "output"]
README_PARAMS = 8_555_530


@pytest.fixture(scope="module")
def space() -> NasBench101Space:
    return get_space("nb101")


@pytest.fixture(scope="module")
def sampled(space) -> list[NB101Arch]:
    return space.sample_many(50, seed=0)


def _small_net(arch: NB101Arch) -> NB101Network:
    return NB101Network(arch, num_classes=10, stem_channels=16)


# ---------------------------------------------------------------- registry and basics


def test_registry_and_size(space):
    assert isinstance(space, NasBench101Space)
    assert space.size() == 423_624
    assert space.encoding_size == ENCODING_SIZE == 21 + 5 * 4
    with pytest.raises(NotEnumerableError):
        next(iter(space.enumerate()))


def test_string_form_is_documented_shape():
    arch = NB101Arch.from_spec([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]],
                               ["input", C3, MP, "output"])
    assert arch.to_string() == "ops=input,conv3x3-bn-relu,maxpool3x3,output;adj=0110/0001/0001/0000"
    assert str(arch) == arch.to_string()


# ---------------------------------------------------------------- sampled archs: build, forward, round trip


def test_sampled_archs_build_forward_and_round_trip(space, sampled):
    x = torch.zeros(2, 3, 32, 32)
    for arch in sampled:
        text = arch.to_string()
        again = space.parse(text)
        assert again == arch and again.to_string() == text
        assert again.canonical_hash() == arch.canonical_hash()
        net = _small_net(arch)
        with torch.no_grad():
            assert net(x).shape == (2, 10)


def test_sampled_archs_are_valid_and_pruned(space, sampled):
    for arch in sampled:
        assert 2 <= arch.num_nodes <= 7
        assert arch.num_edges <= MAX_EDGES
        assert arch.ops[0] == "input" and arch.ops[-1] == "output"
        assert prune(arch.matrix, arch.ops) == (arch.matrix, arch.ops)
        assert all(arch.matrix[i][j] == 0 for i in range(arch.num_nodes) for j in range(i + 1))
    assert len({a.num_nodes for a in sampled}) > 1  # not stuck on one shape
    assert len({a.canonical_hash() for a in sampled}) > 25  # random specs favour small graphs


def test_sampling_is_deterministic(space):
    assert space.sample_many(20, seed=7) == space.sample_many(20, seed=7)
    assert space.sample_many(20, seed=7) != space.sample_many(20, seed=8)


def test_default_size_network_forward(space):
    # A cheap cell keeps the full 128-channel, 3x3-cell network fast on CPU.
    arch = space.parse("ops=input,conv1x1-bn-relu,maxpool3x3,output;adj=0110/0001/0001/0000")
    net = space.build(arch)
    assert net.stem[0].out_channels == 128
    assert sum(isinstance(m, NB101Cell) for m in net.modules()) == 9
    assert net.classifier.in_features == 512
    with torch.no_grad():
        assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_published_parameter_count(space):
    net = space.build(NB101Arch.from_spec(README_MATRIX, README_OPS))
    assert sum(p.numel() for p in net.parameters()) == README_PARAMS


def test_odd_input_size_and_class_count(space):
    net = NB101Network(space.sample(np.random.default_rng(3)), num_classes=7, stem_channels=16)
    with torch.no_grad():
        assert net(torch.zeros(1, 3, 31, 31)).shape == (1, 7)


def test_two_node_cell_is_a_projection():
    arch = NB101Arch.from_spec([[0, 1], [0, 0]], ["input", "output"])
    net = _small_net(arch)
    with torch.no_grad():
        assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    cell = net.cells[0]
    assert list(cell.projections) == ["1"]


# ---------------------------------------------------------------- vertex channels


def test_vertex_channels_split_with_remainder():
    # 1, 2 and 3 feed the output; 4... none. 128 = 43 + 43 + 42.
    m = ((0, 1, 1, 1, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 1), (0, 0, 0, 0, 1), (0, 0, 0, 0, 0))
    assert vertex_channels(m, 64, 128) == [64, 43, 43, 42, 128]


def test_vertex_channels_non_feeder_takes_widest_successor():
    # 1 -> {2, 3}; 2 and 3 feed the output (64 + 63 of 127); 1 takes max(64, 63).
    m = ((0, 1, 0, 0, 0), (0, 0, 1, 1, 0), (0, 0, 0, 0, 1), (0, 0, 0, 0, 1), (0, 0, 0, 0, 0))
    assert vertex_channels(m, 32, 127) == [32, 64, 64, 63, 127]


def test_vertex_channels_sum_to_output_and_never_grow(sampled):
    for arch in sampled:
        m, n = arch.matrix, arch.num_nodes
        ch = vertex_channels(m, 128, 256)
        feeders = [v for v in range(1, n - 1) if m[v][n - 1]]
        if feeders:
            assert sum(ch[v] for v in feeders) == 256
        for v in range(1, n - 1):
            assert ch[v] > 0
            assert all(ch[v] >= ch[w] for w in range(v + 1, n - 1) if m[v][w])


# ---------------------------------------------------------------- encoding


def test_encoding_fixed_length(space, sampled):
    for arch in sampled:
        vec = arch.encode()
        assert vec.dtype == np.float32 and vec.shape == (space.encoding_size,)
        assert np.array_equal(space.encode(arch), vec)
    assert len({a.encode().tobytes() for a in sampled}) == len(set(sampled))


def test_encoding_pads_small_cells():
    arch = NB101Arch.from_spec([[0, 1, 0], [0, 0, 1], [0, 0, 0]], ["input", MP, "output"])
    vec = arch.encode()
    adj = np.zeros((7, 7), dtype=np.float32)
    adj[0, 1] = adj[1, 6] = 1  # the output always sits in slot 6
    assert np.array_equal(vec[:21], adj[np.triu_indices(7, 1)])
    ops = vec[21:].reshape(5, 4)
    assert np.array_equal(ops[0], [0, 0, 1, 0])
    assert np.array_equal(ops[1:], np.tile([0, 0, 0, 1], (4, 1)))


# ---------------------------------------------------------------- canonical hash


def _random_topological_relabel(arch: NB101Arch, rng: np.random.Generator) -> NB101Arch:
    """The same graph with its intermediate nodes renumbered in another random topological order."""
    n, m = arch.num_nodes, arch.matrix
    order, placed = [0], {0}
    while len(order) < n - 1:
        ready = [v for v in range(1, n - 1) if v not in placed and all(u in placed for u in range(n) if m[u][v])]
        v = ready[rng.integers(len(ready))]
        order.append(v)
        placed.add(v)
    order.append(n - 1)
    new = [[m[order[i]][order[j]] for j in range(n)] for i in range(n)]
    return NB101Arch(new, [arch.ops[v] for v in order])


def test_hash_invariant_under_permuting_intermediate_nodes(sampled):
    rng = np.random.default_rng(1)
    for arch in sampled:
        n = arch.num_nodes
        perm = [0, *(1 + rng.permutation(n - 2)), n - 1]
        m = np.array(arch.matrix)[np.ix_(perm, perm)]
        assert graph_hash(tuple(map(tuple, m.tolist())), tuple(arch.ops[p] for p in perm)) == arch.canonical_key()


def test_isomorphic_archs_hash_equal():
    rng = np.random.default_rng(2)
    # Three parallel branches: any order of them is the same graph.
    arch = NB101Arch.from_spec([[0, 1, 1, 1, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0] * 5],
                               ["input", C3, C1, MP, "output"])
    swapped = NB101Arch.from_spec([[0, 1, 1, 1, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0, 0, 0, 0, 1], [0] * 5],
                                  ["input", MP, C3, C1, "output"])
    assert arch != swapped and arch.canonical_hash() == swapped.canonical_hash()
    relabelled = 0
    for candidate in get_space("nb101").sample_many(100, seed=3):
        other = _random_topological_relabel(candidate, rng)
        assert other.canonical_hash() == candidate.canonical_hash()
        relabelled += other != candidate
    assert relabelled > 10  # the test did exercise distinct encodings of one graph


def test_different_graphs_hash_differently():
    io = ["input", C3, C1, "output"]
    chain = NB101Arch.from_spec([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]], io)
    flipped = NB101Arch.from_spec([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]], ["input", C1, C3, "output"])
    parallel = NB101Arch.from_spec([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 0, 0]], io)
    with_skip = NB101Arch.from_spec([[0, 1, 0, 1], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]], io)
    hashes = {a.canonical_hash() for a in (chain, flipped, parallel, with_skip)}
    assert len(hashes) == 4


def _count_unique_graphs(n: int) -> int:
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    seen = set()
    for bits in itertools.product((0, 1), repeat=len(pairs)):
        if sum(bits) > MAX_EDGES:
            continue
        m = [[0] * n for _ in range(n)]
        for (i, j), b in zip(pairs, bits):
            m[i][j] = b
        matrix = tuple(map(tuple, m))
        try:
            if len(prune(matrix, ("input",) * n)[0]) != n:
                continue
        except InvalidArchError:
            continue
        for ops in itertools.product(OPS, repeat=n - 2):
            seen.add(graph_hash(matrix, ("input", *ops, "output")))
    return len(seen)


def test_hash_counts_match_published_graph_counts():
    # NAS-Bench-101's distinct graphs by node count: 1, 6, 84, 2441 for 2..5 nodes.
    assert [_count_unique_graphs(n) for n in (2, 3, 4, 5)] == [1, 6, 84, 2441]


def test_hash_is_stable(space):
    archs = space.sample_many(200, seed=11)
    first = [a.canonical_hash() for a in archs]
    assert first == [space.parse(str(a)).canonical_hash() for a in archs]
    assert first == [a.canonical_hash() for a in space.sample_many(200, seed=11)]
    # Pinned: a change here changes every stored NAS-Bench-101 hash.
    readme = NB101Arch.from_spec(README_MATRIX, README_OPS)
    assert readme.canonical_key() == "5415e6cee30a0b5c3537957a9c8aadc9"


# ---------------------------------------------------------------- parsing


def test_parse_is_deterministic(space):
    text = "ops=input,conv3x3-bn-relu,conv1x1-bn-relu,maxpool3x3,output;adj=01100/00010/00011/00001/00000"
    a, b = space.parse(text), space.parse(text)
    assert a == b and hash(a) == hash(b) and a.canonical_hash() == b.canonical_hash()
    assert space.parse("  adj = 01100/00010/00011/00001/00000 ; ops = input, conv3x3-bn-relu, conv1x1-bn-relu,"
                       " maxpool3x3, output ") == a


def test_unpruned_spec_is_valid_and_pruned(space):
    # Node 2 feeds nothing that reaches the output; node 3 is not reached from the input.
    arch = space.parse("ops=input,conv3x3-bn-relu,maxpool3x3,conv1x1-bn-relu,output;adj=01100/00001/00000/00001/00000")
    assert arch.to_string() == "ops=input,conv3x3-bn-relu,output;adj=010/001/000"
    with pytest.raises(InvalidArchError, match="not pruned"):
        NB101Arch([[0, 1, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]], ["input", C3, MP, "output"])


def test_edge_limit_counts_pruned_edges(space):
    full5 = [[0, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1], [0] * 5]
    with pytest.raises(InvalidArchError, match="10 edges after pruning, at most 9"):
        NB101Arch.from_spec(full5, ["input", C3, C3, C3, "output"])
    # 11 edges as written, but the 2 into the dead-end node 4 go away: 9 remain, as NAS-Bench-101 counts.
    dead = [[0, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1], [0] * 6, [0] * 6]
    arch = NB101Arch.from_spec(dead, ["input", C3, C3, C3, MP, "output"])
    assert arch.num_nodes == 5 and arch.num_edges == 9


BAD = {
    "": "empty",
    "   ": "empty",
    "ops=input,output": "missing 'adj='",
    "adj=01/00": "missing 'ops='",
    "ops=input,output;adj=01/00;": "malformed part",
    "ops=input,output;adj=01/00;ops=input,output": "given twice",
    "op=input,output;adj=01/00": "malformed part",
    "input,output|01/00": "malformed part",
    # truncated strings
    "ops=input,conv3x3-bn-relu,output;adj=011/001": "3 op labels for a 2-row",
    "ops=input,conv3x3-bn-relu,output;adj=011/001/00": "row 2 has 2 entries, expected 3",
    "ops=input,conv3x3-bn-re": "missing 'adj='",
    "ops=input,conv3x3-bn-re,output;adj=011/001/000": "unknown NAS-Bench-101 op 'conv3x3-bn-re'",
    "ops=input,conv3x3-bn-relu,output;adj=011/001/": "adjacency row 2 is ''",
    "ops=input,,output;adj=011/001/000": "empty op label",
    # labels
    "ops=input,conv5x5-bn-relu,output;adj=011/001/000": "unknown NAS-Bench-101 op 'conv5x5-bn-relu'",
    "ops=conv3x3-bn-relu,maxpool3x3,output;adj=011/001/000": "node 0 must be 'input'",
    "ops=input,maxpool3x3,conv3x3-bn-relu;adj=011/001/000": "last node must be 'output'",
    "ops=input,output,output;adj=011/001/000": "node 1 is labelled 'output'",
    # node counts
    "ops=input;adj=0": "at least 2 nodes",
    "ops=input," + "conv3x3-bn-relu," * 6 + "output;adj=" + "/".join(["00000000"] * 8): "at most 7 nodes, got 8",
    # matrix shape and entries
    "ops=input,conv3x3-bn-relu,output;adj=0110/001/000": "row 0 has 4 entries, expected 3",
    "ops=input,conv3x3-bn-relu,output;adj=012/001/000": "adjacency row 0 is '012'",
    "ops=input,conv3x3-bn-relu,output;adj=0x1/001/000": "adjacency row 0 is '0x1'",
    "ops=input,conv3x3-bn-relu,output;adj=0-11/001/000": "adjacency row 0 is '0-11'",
    # cycles and backward edges
    "ops=input,conv3x3-bn-relu,conv1x1-bn-relu,output;adj=0100/0011/0100/0000": "graph has a cycle 1->2->1",
    "ops=input,conv3x3-bn-relu,output;adj=010/011/000": "graph has a cycle 1->1",
    "ops=input,conv3x3-bn-relu,output;adj=010/001/100": "graph has a cycle 0->1->2->0",
    "ops=input,conv3x3-bn-relu,conv1x1-bn-relu,output;adj=0100/0001/0100/0000": "edge 2->1 goes backwards",
    # connectivity and edge budget
    "ops=input,conv3x3-bn-relu,output;adj=010/000/000": "input is not connected to output",
    "ops=input,conv3x3-bn-relu,output;adj=000/001/000": "input is not connected to output",
    "ops=input,output;adj=00/00": "input is not connected to output",
    "ops=input," + "conv3x3-bn-relu," * 5 + "output;adj=0111111/0011111/0001111/0000111/0000011/0000001/0000000":
        "21 edges after pruning, at most 9",
}


@pytest.mark.parametrize("text", list(BAD))
def test_bad_strings_raise_one_line_reason(space, text):
    with pytest.raises(InvalidArchError) as info:
        space.parse(text)
    message = str(info.value)
    assert "\n" not in message and message
    assert BAD[text] in message


def test_non_string_is_rejected(space):
    with pytest.raises(InvalidArchError, match="parses an architecture's string form, got NoneType"):
        space.parse(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------- optuna


def _params(matrix: list[list[int]], ops: list[str]) -> dict:
    n = len(matrix)
    padded = {f"edge_{i}->{j}": 0 for i in range(7) for j in range(i + 1, 7)}
    slot = list(range(n - 1)) + [6]
    for i in range(n):
        for j in range(n):
            if matrix[i][j]:
                padded[f"edge_{slot[i]}->{slot[j]}"] = 1
    return {**padded, **{f"op_{k}": ops[k] if k < n - 1 else C3 for k in range(1, 6)}}


def test_suggest_with_enqueued_valid_and_invalid_trials(space):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.enqueue_trial(_params([[0, 1, 0], [0, 0, 1], [0, 0, 0]], ["input", MP, "output"]))
    study.enqueue_trial({f"edge_{i}->{j}": 0 for i in range(7) for j in range(i + 1, 7)})
    trial = study.ask()
    arch = space.suggest(trial)
    # Nodes 2..5 hang off nothing and are pruned away.
    assert arch.to_string() == "ops=input,maxpool3x3,output;adj=010/001/000"
    assert len(trial.params) == 21 + 5
    study.tell(trial, 1.0)
    trial = study.ask()
    with pytest.raises(optuna.TrialPruned, match="invalid NAS-Bench-101 graph: input is not connected to output"):
        space.suggest(trial)
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)


def test_suggest_ask_tell_loop(space):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    found: list[NB101Arch] = []
    for _ in range(60):
        trial = study.ask()
        try:
            arch = space.suggest(trial)
        except optuna.TrialPruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        assert space.parse(str(arch)) == arch
        assert set(trial.params) == {f"edge_{i}->{j}" for i in range(7) for j in range(i + 1, 7)} | {
            f"op_{k}" for k in range(1, 6)}
        study.tell(trial, float(arch.num_edges))
        found.append(arch)
    assert len(found) >= 20


def test_optimize_records_invalid_proposals_as_pruned(space):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=2))
    study.optimize(lambda t: float(space.suggest(t).num_nodes), n_trials=30)
    states = {t.state for t in study.trials}
    assert optuna.trial.TrialState.COMPLETE in states and optuna.trial.TrialState.PRUNED in states
