"""NAS-Bench-101: cells of up to 7 nodes and 9 edges, 423,624 distinct graphs.

Space (Ying et al., ICML 2019): a cell is a DAG whose node 0 is the input, whose
last node is the output and whose up to 5 intermediate nodes each apply one of
`conv3x3-bn-relu`, `conv1x1-bn-relu` or `maxpool3x3`. The adjacency matrix is
strictly upper-triangular (node order is a topological order, so the graph is
acyclic). Nodes that are not on a path from input to output are pruned; the
pruned graph must still join input to output and have at most 9 edges (edges are
counted after pruning, as NAS-Bench-101 does). An unpruned spec is valid, and its
canonical form (the `NB101Arch` value) is the pruned one.

String form: the node labels, input and output included, then the adjacency
rows (row i lists the edges i->j), for example::

    ops=input,conv3x3-bn-relu,maxpool3x3,output;adj=0110/0001/0001/0000

The rows must form a square 0/1 matrix with one row per label. Whitespace around
separators is ignored, the two parts may come in either order, and `to_string`
prints the form above.

Network: a 3x3 conv-BN-ReLU stem (128 channels), 3 stacks of 3 cells with a 2x2
max-pool halving the resolution and doubling the channels between stacks,
global average pooling and a linear classifier. Inside a cell the output
channels are split among the vertices that feed the output (their outputs are
concatenated), other vertices take the largest width of their successors, wider
inputs are truncated to a vertex's width, and the cell input reaches each vertex
it feeds (the output included, where it is summed in) through a 1x1
conv-BN-ReLU projection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError
from nasutil.lazy_imports import lazy_attributes
from nasutil.space import SearchSpace

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

INPUT, OUTPUT = "input", "output"
OPS: tuple[str, ...] = ("conv3x3-bn-relu", "conv1x1-bn-relu", "maxpool3x3")
MAX_NODES = 7
MAX_EDGES = 9
#: every possible edge (from, to) of a 7-node cell, in row-major order
ALL_EDGES: tuple[tuple[int, int], ...] = tuple((i, j) for i in range(MAX_NODES) for j in range(i + 1, MAX_NODES))
#: 21 upper-triangle bits of the padded 7x7 matrix + one-hot (3 ops or none) of the 5 intermediate slots
ENCODING_SIZE = len(ALL_EDGES) + (MAX_NODES - 2) * (len(OPS) + 1)
#: distinct graphs of the space, as published (counted up to isomorphism)
NUM_GRAPHS = 423_624
#: TF batch norm of the reference: decay 0.997 (PyTorch momentum 0.003), epsilon 1e-5
BN_MOMENTUM, BN_EPS = 0.003, 1e-5

Matrix = tuple[tuple[int, ...], ...]

# The torch modules live in `nb101_network`; these names still resolve here, importing torch on first use.
NETWORK_NAMES = ("ConvBNReLU", "NB101Cell", "NB101Network")
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(NETWORK_NAMES, "nasutil_search_spaces.nb101_network"))


# ---------------------------------------------------------------- graph checks


def _find_cycle(matrix: Matrix) -> list[int] | None:
    """A directed cycle as a node list (first node repeated at the end), or None."""
    n = len(matrix)
    state = [0] * n  # 0 unvisited, 1 on the DFS stack, 2 done
    stack: list[int] = []

    def visit(v: int) -> list[int] | None:
        state[v] = 1
        stack.append(v)
        for w in range(n):
            if not matrix[v][w]:
                continue
            if state[w] == 1:
                return stack[stack.index(w):] + [w]
            if state[w] == 0 and (found := visit(w)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in range(n):
        if state[v] == 0 and (found := visit(v)):
            return found
    return None


def _reachable(matrix: Matrix, start: int, forward: bool) -> set[int]:
    n = len(matrix)
    seen, frontier = {start}, [start]
    while frontier:
        v = frontier.pop()
        for w in range(n):
            edge = matrix[v][w] if forward else matrix[w][v]
            if edge and w not in seen:
                seen.add(w)
                frontier.append(w)
    return seen


def prune(matrix: Matrix, ops: tuple[str, ...]) -> tuple[Matrix, tuple[str, ...]]:
    """Drop the nodes that are not on a path from input to output (the graph must be upper-triangular)."""
    n = len(matrix)
    keep = sorted(_reachable(matrix, 0, True) & _reachable(matrix, n - 1, False))
    if keep[:1] != [0] or keep[-1:] != [n - 1]:
        raise InvalidArchError("input is not connected to output")
    return tuple(tuple(matrix[i][j] for j in keep) for i in keep), tuple(ops[i] for i in keep)


def check_spec(matrix: Matrix, ops: tuple[str, ...]) -> tuple[Matrix, tuple[str, ...]]:
    """Validate a cell spec as NAS-Bench-101 does and return its pruned (canonical) form."""
    n = len(matrix)
    if len(ops) != n:
        raise InvalidArchError(f"{len(ops)} op labels for a {n}-row adjacency matrix; give one label per node")
    if n < 2:
        raise InvalidArchError(f"a cell needs at least 2 nodes (input and output), got {n}")
    if n > MAX_NODES:
        raise InvalidArchError(f"a cell has at most {MAX_NODES} nodes, got {n}")
    for i, row in enumerate(matrix):
        if len(row) != n:
            raise InvalidArchError(
                f"adjacency row {i} has {len(row)} entries, expected {n} (the matrix must be square)")
        if any(v not in (0, 1) for v in row):
            raise InvalidArchError(f"adjacency row {i} has an entry other than 0 or 1")
    if ops[0] != INPUT:
        raise InvalidArchError(f"node 0 must be {INPUT!r}, got {ops[0]!r}")
    if ops[-1] != OUTPUT:
        raise InvalidArchError(f"the last node must be {OUTPUT!r}, got {ops[-1]!r}")
    for i, op in enumerate(ops[1:-1], start=1):
        if op not in OPS:
            where = "only the first node" if op == INPUT else "only the last node" if op == OUTPUT else None
            if where:
                raise InvalidArchError(f"node {i} is labelled {op!r}, which {where} may be")
            raise InvalidArchError(f"unknown NAS-Bench-101 op {op!r} at node {i} (ops: {', '.join(OPS)})")
    cycle = _find_cycle(matrix)
    if cycle:
        raise InvalidArchError(f"graph has a cycle {'->'.join(map(str, cycle))}; a cell must be acyclic")
    for i in range(n):
        for j in range(i):
            if matrix[i][j]:
                raise InvalidArchError(f"edge {i}->{j} goes backwards; the matrix must be strictly "
                                       "upper-triangular (nodes in topological order)")
    pruned, pruned_ops = prune(matrix, ops)
    edges = sum(map(sum, pruned))
    if edges > MAX_EDGES:
        raise InvalidArchError(f"graph has {edges} edges after pruning, at most {MAX_EDGES} allowed")
    return pruned, pruned_ops


def graph_hash(matrix: Matrix, labels: tuple[str, ...]) -> str:
    """An isomorphism-invariant fingerprint of a labelled DAG (the NAS-Bench-101 graph-hash idea).

    Each node starts from a digest of its label and its in- and out-degree; then, as many
    rounds as there are nodes, it is re-hashed with the sorted digests of its predecessors
    and, separately, of its successors. The sorted multiset of final digests is hashed.
    Node order never enters, so relabelled (isomorphic) graphs give the same value.
    """
    n = len(matrix)

    def digest(text: str) -> str:
        return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()

    preds = [[u for u in range(n) if matrix[u][v]] for v in range(n)]
    succs = [[w for w in range(n) if matrix[v][w]] for v in range(n)]
    node = [digest(f"{labels[v]}:{len(preds[v])}:{len(succs[v])}") for v in range(n)]
    for _ in range(n):
        node = [digest(node[v] + "<" + ",".join(sorted(node[u] for u in preds[v]))
                       + ">" + ",".join(sorted(node[w] for w in succs[v]))) for v in range(n)]
    return digest("|".join(sorted(node)))


# ---------------------------------------------------------------- the arch value


@dataclass(frozen=True)
class NB101Arch(Arch):
    """A pruned cell: its adjacency matrix and one label per node (`input`, ops..., `output`).

    Construct from any spec with `NB101Arch.from_spec`, which prunes; the constructor
    itself only accepts the canonical (already pruned) form, so every value prints and
    parses back to itself.
    """

    matrix: Matrix
    ops: tuple[str, ...]
    space = "nb101"

    def __post_init__(self) -> None:
        matrix = tuple(tuple(int(v) for v in row) for row in self.matrix)
        ops = tuple(str(op) for op in self.ops)
        object.__setattr__(self, "matrix", matrix)
        object.__setattr__(self, "ops", ops)
        pruned = check_spec(matrix, ops)
        if pruned != (matrix, ops):
            raise InvalidArchError("cell is not pruned (some node is off every input-to-output path); "
                                   "use NB101Arch.from_spec")

    @classmethod
    def from_spec(cls, matrix: Sequence[Sequence[int]], ops: Sequence[str]) -> NB101Arch:
        """The canonical arch of a (possibly unpruned) spec; raises `InvalidArchError` if invalid."""
        return cls(*check_spec(tuple(tuple(int(v) for v in row) for row in matrix), tuple(str(op) for op in ops)))

    @property
    def num_nodes(self) -> int:
        return len(self.ops)

    @property
    def num_edges(self) -> int:
        return sum(map(sum, self.matrix))

    def to_string(self) -> str:
        adj = "/".join("".join(map(str, row)) for row in self.matrix)
        return f"ops={','.join(self.ops)};adj={adj}"

    def canonical_key(self) -> str:
        return graph_hash(self.matrix, self.ops)

    def encode(self) -> np.ndarray:
        """21 upper-triangle bits of a 7x7 matrix + 5 x one-hot(conv3x3, conv1x1, maxpool, none).

        A smaller cell is padded in the middle: its intermediate nodes keep slots 1..n-2,
        the output always sits in slot 6, and empty slots are `none` with no edges.
        """
        n = self.num_nodes
        slot = list(range(n - 1)) + [MAX_NODES - 1]
        adj = np.zeros((MAX_NODES, MAX_NODES), dtype=np.float32)
        for i in range(n):
            for j in range(n):
                adj[slot[i], slot[j]] = self.matrix[i][j]
        ops = np.zeros((MAX_NODES - 2, len(OPS) + 1), dtype=np.float32)
        ops[:, len(OPS)] = 1.0
        for k, op in enumerate(self.ops[1:-1]):
            ops[k] = 0.0
            ops[k, OPS.index(op)] = 1.0
        return np.concatenate([adj[np.triu_indices(MAX_NODES, 1)], ops.ravel()])


def parse_cell(text: str) -> NB101Arch:
    """Parse `ops=input,...,output;adj=0110/...` with a precise reason on failure."""
    text = text.strip() if isinstance(text, str) else ""
    if not text:
        raise InvalidArchError("empty NAS-Bench-101 cell string")
    parts: dict[str, str] = {}
    for part in text.split(";"):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in ("ops", "adj"):
            raise InvalidArchError(f"malformed part {part.strip()!r} of {text!r} (expected 'ops=...' and 'adj=...')")
        if key in parts:
            raise InvalidArchError(f"{key!r} given twice in {text!r}")
        parts[key] = value.strip()
    for key in ("ops", "adj"):
        if key not in parts:
            raise InvalidArchError(f"missing '{key}=' part in {text!r}")
    ops = tuple(op.strip() for op in parts["ops"].split(","))
    if "" in ops:
        raise InvalidArchError(f"empty op label in 'ops={parts['ops']}'")
    rows = tuple(row.strip() for row in parts["adj"].split("/"))
    for i, row in enumerate(rows):
        if not row or set(row) - {"0", "1"}:
            raise InvalidArchError(f"adjacency row {i} is {row!r}; rows are strings of 0/1 digits separated by '/'")
    return NB101Arch.from_spec(tuple(tuple(int(c) for c in row) for row in rows), ops)


# ---------------------------------------------------------------- the network's widths


def vertex_channels(matrix: Matrix, c_in: int, c_out: int) -> list[int]:
    """Width of every vertex of a pruned cell, as in the reference model builder.

    The vertices that feed the output share `c_out` (the first ones in node order take
    one extra channel each while the division leaves a remainder), so their concatenation
    has exactly `c_out` channels; every other intermediate vertex takes the widest of its
    successors. Widths then never grow along an edge, so wider inputs are truncated.
    """
    n = len(matrix)
    channels = [0] * n
    channels[0], channels[-1] = c_in, c_out
    feeders = [v for v in range(1, n - 1) if matrix[v][n - 1]]
    if not feeders:
        return channels
    if c_out < len(feeders):
        raise ValueError(f"{c_out} output channels cannot be split among {len(feeders)} vertices")
    base, extra = divmod(c_out, len(feeders))
    for rank, v in enumerate(feeders):
        channels[v] = base + (rank < extra)
    for v in range(n - 2, 0, -1):
        if not matrix[v][n - 1]:
            channels[v] = max(channels[w] for w in range(v + 1, n - 1) if matrix[v][w])
    return channels


# ---------------------------------------------------------------- the space


class NasBench101Space(SearchSpace[NB101Arch]):
    name = "nb101"
    description = "NAS-Bench-101 cells: DAGs of <=7 nodes, <=9 edges, 3 ops; 423,624 graphs (Ying et al. 2019)"
    default_input_size = 32

    def sample(self, rng: np.random.Generator) -> NB101Arch:
        """Draw random 0/1 upper triangles and ops until the spec is valid; return it pruned.

        This is NAS-Bench-101's own random spec. Pruning and the edge limit make it favour
        small cells: about 0.3% of draws have 7 nodes, against 85% of the distinct graphs.
        """
        while True:
            matrix = np.triu(rng.integers(0, 2, size=(MAX_NODES, MAX_NODES)), 1)
            ops = (INPUT, *(OPS[i] for i in rng.integers(len(OPS), size=MAX_NODES - 2)), OUTPUT)
            try:
                return NB101Arch.from_spec(matrix.tolist(), ops)
            except InvalidArchError:
                continue

    def suggest(self, trial: optuna.Trial) -> NB101Arch:
        """One 0/1 choice per possible edge (`edge_i->j`) and one op per intermediate node (`op_k`).

        A proposal that is not a valid cell (input cut off from output, or more than 9 edges
        after pruning) raises `optuna.TrialPruned` with the reason: `study.optimize` records
        the trial as pruned and goes on, and an ask/tell loop should tell it as pruned.
        Repairing the proposal instead would hand the sampler parameters that did not make
        the architecture it scored.
        """
        import optuna

        matrix = [[0] * MAX_NODES for _ in range(MAX_NODES)]
        for i, j in ALL_EDGES:
            matrix[i][j] = trial.suggest_categorical(f"edge_{i}->{j}", (0, 1))
        ops = (INPUT, *(trial.suggest_categorical(f"op_{k}", OPS) for k in range(1, MAX_NODES - 1)), OUTPUT)
        try:
            return NB101Arch.from_spec(matrix, ops)
        except InvalidArchError as exc:
            raise optuna.TrialPruned(f"invalid NAS-Bench-101 graph: {exc}") from None

    def parse(self, text: str) -> NB101Arch:
        return parse_cell(text)

    def build(self, arch: NB101Arch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        from nasutil_search_spaces.nb101_network import NB101Network

        # Fully convolutional up to global pooling, so any input size works.
        return NB101Network(arch, num_classes=num_classes, in_channels=self.in_channels)

    @property
    def encoding_size(self) -> int:
        return ENCODING_SIZE

    def size(self) -> int:
        return NUM_GRAPHS
