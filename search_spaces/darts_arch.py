"""DARTS genotypes without torch: the ops, the cell shape, the arch and its string, shared by the space and its
torch network."""

from __future__ import annotations

import ast
import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError

if TYPE_CHECKING:
    import optuna

#: all 8 DARTS ops, in the paper's order; `none` exists only in the supernet
DARTS_OPS: tuple[str, ...] = ("none", "max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3",
                              "sep_conv_5x5", "dil_conv_3x3", "dil_conv_5x5")
#: the ops a discrete genotype chooses from
OPS: tuple[str, ...] = tuple(op for op in DARTS_OPS if op != "none")
NUM_NODES = 4
CELLS: tuple[str, ...] = ("normal", "reduce")
_FIELDS: tuple[str, ...] = ("normal", "normal_concat", "reduce", "reduce_concat")
_MAX_TEXT = 10_000

Edge = tuple[str, int]
Node = tuple[Edge, ...]
Cell = tuple[Node, ...]


@dataclass(frozen=True)
class GenotypeShape:
    """What a genotype of this kind holds: `nodes` intermediate nodes per cell, each summing `inputs` ops
    applied to distinct earlier states, over `ops`. DARTS is 4 nodes, 2 inputs, its 7 ops; the `cell`
    generator makes others."""

    nodes: int = NUM_NODES
    inputs: int = 2
    ops: tuple[str, ...] = OPS
    label: str = "DARTS"

    @property
    def concat(self) -> tuple[int, ...]:
        return tuple(range(2, 2 + self.nodes))

    @property
    def states(self) -> int:
        """States the last node can read: the two cell inputs and every node before it."""
        return self.nodes + 1


DARTS_SHAPE = GenotypeShape()


def _short(text: str, limit: int = 60) -> str:
    """A one-line, bounded repr of user text for error messages."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _check_cell(cell: str, nodes: object, shape: GenotypeShape = DARTS_SHAPE) -> Cell:
    """Validate one cell's nodes and return them canonically (each node's edges sorted by input)."""
    k = shape.inputs
    if not isinstance(nodes, (tuple, list)) or len(nodes) != shape.nodes:
        got = len(nodes) if isinstance(nodes, (tuple, list)) else type(nodes).__name__
        raise InvalidArchError(f"{cell} cell needs {shape.nodes} nodes, got {got}")
    out: list[Node] = []
    for i, node in enumerate(nodes):
        if not isinstance(node, (tuple, list)) or len(node) != k:
            raise InvalidArchError(f"{cell} cell node {i} needs exactly {k} (op, input) edge{'s' if k > 1 else ''}")
        node = tuple(tuple(e) if isinstance(e, list) else e for e in node)
        for edge in node:
            if not (isinstance(edge, tuple) and len(edge) == 2 and isinstance(edge[0], str)
                    and isinstance(edge[1], int) and not isinstance(edge[1], bool)):
                raise InvalidArchError(f"{cell} cell node {i}: expected an (op name, input index) pair, got {edge!r}")
            op, src = edge
            if op == "none" and "none" not in shape.ops:
                raise InvalidArchError(f"{cell} cell node {i}: 'none' is the zero op of the {shape.label} supernet "
                                       "and never appears in a discrete genotype")
            if op not in shape.ops:
                raise InvalidArchError(f"{cell} cell node {i}: unknown {shape.label} op {op!r} "
                                       f"(ops: {', '.join(shape.ops)})")
            if not 0 <= src <= i + 1:
                raise InvalidArchError(f"{cell} cell node {i} reads states 0..{i + 1}, got input {src}")
        sources = [src for _, src in node]
        if len(set(sources)) < len(sources):
            repeated = next(src for src in sources if sources.count(src) > 1)
            raise InvalidArchError(f"{cell} cell node {i} uses input {repeated} twice; its {k} inputs must be "
                                   f"distinct")
        out.append(tuple(sorted(node, key=lambda e: e[1])))  # type: ignore[arg-type]
    return tuple(out)


@dataclass(frozen=True)
class DartsArch(Arch):
    """A DARTS genotype: for each cell, 4 nodes of 2 (op, input) edges, sorted by input (or the nodes,
    inputs and ops of another `shape`)."""

    normal: Cell
    reduce: Cell
    shape: GenotypeShape = field(default=DARTS_SHAPE, repr=False)
    space = "darts"

    def __post_init__(self) -> None:
        # Canonicalise on construction so that equal cells compare (and hash) equal.
        object.__setattr__(self, "normal", _check_cell("normal", self.normal, self.shape))
        object.__setattr__(self, "reduce", _check_cell("reduce", self.reduce, self.shape))

    def cell(self, name: str) -> Cell:
        return self.normal if name == "normal" else self.reduce

    def to_string(self) -> str:
        def edges(cell: Cell) -> str:
            return "[" + ", ".join(f"({op!r}, {src})" for node in cell for op, src in node) + "]"

        concat = list(self.shape.concat)
        return (f"Genotype(normal={edges(self.normal)}, normal_concat={concat}, "
                f"reduce={edges(self.reduce)}, reduce_concat={concat})")

    def encode(self) -> np.ndarray:
        """Per cell, node and edge slot: one-hot input (5 for DARTS) then one-hot op (7)."""
        shape = self.shape
        vec = np.zeros((len(CELLS), shape.nodes, shape.inputs, shape.states + len(shape.ops)), dtype=np.float32)
        for c, name in enumerate(CELLS):
            for i, node in enumerate(self.cell(name)):
                for s, (op, src) in enumerate(node):
                    vec[c, i, s, src] = 1.0
                    vec[c, i, s, shape.states + shape.ops.index(op)] = 1.0
        return vec.ravel()


def _literal(field: str, node: ast.expr) -> object:
    """A field's value: a Python literal, or `range(a, b)` (how DARTS prints concat lists)."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and not node.keywords and 1 <= len(node.args) <= 3):
        bounds = [_literal(field, arg) for arg in node.args]
        if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
            return list(range(*bounds))  # type: ignore[arg-type]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        raise InvalidArchError(f"{field} must be a literal list, got {_short(ast.unparse(node))}") from None


def _edges(field: str, value: object, shape: GenotypeShape = DARTS_SHAPE) -> Cell:
    """Turn a flat list of nodes x inputs (op, input) pairs into nodes (validated by DartsArch)."""
    n, k = shape.nodes, shape.inputs
    if not isinstance(value, (list, tuple)):
        raise InvalidArchError(f"{field} must be a list of (op, input) pairs, got {type(value).__name__}")
    if len(value) != k * n:
        raise InvalidArchError(f"{field} needs {k * n} (op, input) pairs ({n} nodes x {k}), got {len(value)}")
    return tuple(tuple(value[k * i:k * (i + 1)]) for i in range(n))  # type: ignore[return-value]


def parse_genotype(text: str, shape: GenotypeShape = DARTS_SHAPE, arch_class: type[DartsArch] | None = None,
                   **extra) -> DartsArch:
    """Parse `Genotype(normal=[...], normal_concat=[...], reduce=[...], reduce_concat=[...])` without eval.

    The text is only parsed into a syntax tree; field values are read with
    `ast.literal_eval`, so nothing in it is ever executed. `shape`, `arch_class` and `extra` (further
    fields of that class) parse the genotypes of a generated space of this kind.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidArchError("empty DARTS genotype string")
    text = text.strip()
    if len(text) > _MAX_TEXT:
        raise InvalidArchError(f"DARTS genotype string too long ({len(text)} characters)")
    expected = "expected Genotype(normal=[...], normal_concat=[...], reduce=[...], reduce_concat=[...])"
    try:
        tree = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise InvalidArchError(f"malformed DARTS genotype {_short(text)}: {expected}") from None
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and tree.func.id == "Genotype"):
        raise InvalidArchError(f"not a DARTS genotype {_short(text)}: {expected}")
    if len(tree.args) > len(_FIELDS):
        raise InvalidArchError(f"Genotype takes {len(_FIELDS)} fields, got {len(tree.args)} positional")
    fields: dict[str, ast.expr] = {}
    for name, arg in zip(_FIELDS, tree.args):
        if isinstance(arg, ast.Starred):
            raise InvalidArchError("Genotype fields must be written out, not unpacked with *")
        fields[name] = arg
    for kw in tree.keywords:
        if kw.arg is None:
            raise InvalidArchError("Genotype fields must be written out, not unpacked with **")
        if kw.arg not in _FIELDS:
            raise InvalidArchError(f"unknown Genotype field {kw.arg!r} (fields: {', '.join(_FIELDS)})")
        if kw.arg in fields:
            raise InvalidArchError(f"Genotype field {kw.arg!r} given twice")
        fields[kw.arg] = kw.value
    missing = [f for f in _FIELDS if f not in fields]
    if missing:
        raise InvalidArchError(f"Genotype is missing field(s): {', '.join(missing)}")
    values = {name: _literal(name, node) for name, node in fields.items()}
    for cell in CELLS:
        concat = values[f"{cell}_concat"]
        if not isinstance(concat, (list, tuple)) or list(concat) != list(shape.concat):
            raise InvalidArchError(f"{cell}_concat must be {list(shape.concat)} (all {shape.nodes} intermediate "
                                   f"nodes), got {_short(repr(concat))}")
    return (arch_class or DartsArch)(normal=_edges("normal", values["normal"], shape),
                                     reduce=_edges("reduce", values["reduce"], shape), shape=shape, **extra)


# --- space -------------------------------------------------------------------------------------------------


def input_sets(node: int, inputs: int = 2) -> list[tuple[int, ...]]:
    """The sets of `inputs` distinct states node `node` can read, in increasing order."""
    return list(itertools.combinations(range(node + 2), inputs))


def sample_cells(rng: np.random.Generator, shape: GenotypeShape) -> tuple[Cell, Cell]:
    """Uniform over the canonical genotypes: a uniform input set per node, then a uniform op per edge."""
    cells = []
    for _ in CELLS:
        nodes = []
        for i in range(shape.nodes):
            sets = input_sets(i, shape.inputs)
            chosen = sets[int(rng.integers(len(sets)))]
            ops = [shape.ops[k] for k in rng.integers(len(shape.ops), size=shape.inputs)]
            nodes.append(tuple(zip(ops, chosen)))
        cells.append(tuple(nodes))
    return cells[0], cells[1]


def suggest_cells(trial: optuna.Trial, shape: GenotypeShape) -> tuple[Cell, Cell]:
    """Per node: its input set ("a-b", increasing), then the op on each of its inputs (a, b, ...)."""
    cells = []
    for cell in CELLS:
        nodes = []
        for i in range(shape.nodes):
            choices = ["-".join(map(str, s)) for s in input_sets(i, shape.inputs)]
            chosen = map(int, trial.suggest_categorical(f"{cell}_node{i}_inputs", choices).split("-"))
            nodes.append(tuple((trial.suggest_categorical(f"{cell}_node{i}_op_{chr(ord('a') + e)}", shape.ops), src)
                               for e, src in enumerate(chosen)))
        cells.append(tuple(nodes))
    return cells[0], cells[1]


def genotype_count(shape: GenotypeShape) -> int:
    """Per node C(i+2, k) input sets x ops^k; multiplied over nodes, squared for the two cells."""
    k, n_ops = shape.inputs, len(shape.ops)
    per_cell = math.prod(math.comb(i + 2, k) * n_ops ** k for i in range(shape.nodes))
    return per_cell ** len(CELLS)


def genotype_encoding_size(shape: GenotypeShape) -> int:
    return len(CELLS) * shape.nodes * shape.inputs * (shape.states + len(shape.ops))
