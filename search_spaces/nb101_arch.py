"""NAS-Bench-101 cells without torch: the ops, the adjacency matrix and its checks, the arch, its string and
hash, and each vertex's channels, shared by the space and its torch network."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError


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
