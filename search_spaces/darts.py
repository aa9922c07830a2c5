"""DARTS: a normal and a reduction cell stacked into the CIFAR evaluation network.

Search space (Liu et al., ICLR 2019): each cell has 4 intermediate nodes; node i
(i = 0..3) adds two ops applied to two distinct earlier states out of
{c_{k-2}, c_{k-1}, node 0, ..., node i-1} (state indices 0..i+1). The cell output
is the concatenation of the 4 intermediate nodes (states 2..5).

Of the 8 DARTS ops, `none` is the zero op of the continuous supernet: the
derivation step never picks it, so a discrete genotype uses only the other 7 and
the parser rejects `none`.

Two ops feeding a node are summed, so their order does not matter: a node is the
unordered pair of its (op, input) edges, stored sorted by input index. Equal
cells therefore have equal strings; other isomorphisms (e.g. swapping two
intermediate nodes that nothing else reads) are not merged.

Network (the DARTS CIFAR evaluation model, no auxiliary head, no drop-path): a
3x3 conv stem to 3*C channels + BN, `layers` cells with reduction cells at 1/3
and 2/3 of the depth (each doubling the channels), global average pooling and a
linear classifier. Pooling ops are plain pooling, as in the evaluation model.
"""

from __future__ import annotations

import ast
import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError, NasutilError
from nasutil.lazy_imports import lazy_attributes
from nasutil.space import SearchSpace

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

#: all 8 DARTS ops, in the paper's order; `none` exists only in the supernet
DARTS_OPS: tuple[str, ...] = ("none", "max_pool_3x3", "avg_pool_3x3", "skip_connect", "sep_conv_3x3",
                              "sep_conv_5x5", "dil_conv_3x3", "dil_conv_5x5")
#: the ops a discrete genotype chooses from
OPS: tuple[str, ...] = tuple(op for op in DARTS_OPS if op != "none")
NUM_NODES = 4
#: states a node can read: c_{k-2}, c_{k-1} and the 4 intermediate nodes, of which node 3 may read 0..4
NUM_INPUTS = NUM_NODES + 1
CONCAT: tuple[int, ...] = tuple(range(2, 2 + NUM_NODES))
CELLS: tuple[str, ...] = ("normal", "reduce")
_FIELDS: tuple[str, ...] = ("normal", "normal_concat", "reduce", "reduce_concat")
_MAX_TEXT = 10_000

Edge = tuple[str, int]
Node = tuple[Edge, Edge]
Cell = tuple[Node, ...]

# The torch modules live in `darts_network`; these names still resolve here, importing torch on first use.
NETWORK_NAMES = ("FactorizedReduce", "SepConv", "DilConv", "make_op", "DartsCell", "DartsNetwork")
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(NETWORK_NAMES, "nasutil_search_spaces.darts_network"))


def _short(text: str, limit: int = 60) -> str:
    """A one-line, bounded repr of user text for error messages."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _check_cell(cell: str, nodes: object) -> Cell:
    """Validate one cell's nodes and return them canonically (each node's edges sorted by input)."""
    if not isinstance(nodes, (tuple, list)) or len(nodes) != NUM_NODES:
        got = len(nodes) if isinstance(nodes, (tuple, list)) else type(nodes).__name__
        raise InvalidArchError(f"{cell} cell needs {NUM_NODES} nodes, got {got}")
    out: list[Node] = []
    for i, node in enumerate(nodes):
        if not isinstance(node, (tuple, list)) or len(node) != 2:
            raise InvalidArchError(f"{cell} cell node {i} needs exactly 2 (op, input) edges")
        node = tuple(tuple(e) if isinstance(e, list) else e for e in node)
        for edge in node:
            if not (isinstance(edge, tuple) and len(edge) == 2 and isinstance(edge[0], str)
                    and isinstance(edge[1], int) and not isinstance(edge[1], bool)):
                raise InvalidArchError(f"{cell} cell node {i}: expected an (op name, input index) pair, got {edge!r}")
            op, src = edge
            if op == "none":
                raise InvalidArchError(f"{cell} cell node {i}: 'none' is the zero op of the DARTS supernet and "
                                       "never appears in a discrete genotype")
            if op not in OPS:
                raise InvalidArchError(f"{cell} cell node {i}: unknown DARTS op {op!r} (ops: {', '.join(OPS)})")
            if not 0 <= src <= i + 1:
                raise InvalidArchError(f"{cell} cell node {i} reads states 0..{i + 1}, got input {src}")
        (_, a), (_, b) = node
        if a == b:
            raise InvalidArchError(f"{cell} cell node {i} uses input {a} twice; its two inputs must be distinct")
        out.append(tuple(sorted(node, key=lambda e: e[1])))  # type: ignore[arg-type]
    return tuple(out)


@dataclass(frozen=True)
class DartsArch(Arch):
    """A DARTS genotype: for each cell, 4 nodes of 2 (op, input) edges, sorted by input."""

    normal: Cell
    reduce: Cell
    space = "darts"

    def __post_init__(self) -> None:
        # Canonicalise on construction so that equal cells compare (and hash) equal.
        object.__setattr__(self, "normal", _check_cell("normal", self.normal))
        object.__setattr__(self, "reduce", _check_cell("reduce", self.reduce))

    def cell(self, name: str) -> Cell:
        return self.normal if name == "normal" else self.reduce

    def to_string(self) -> str:
        def edges(cell: Cell) -> str:
            return "[" + ", ".join(f"({op!r}, {src})" for node in cell for op, src in node) + "]"

        concat = list(CONCAT)
        return (f"Genotype(normal={edges(self.normal)}, normal_concat={concat}, "
                f"reduce={edges(self.reduce)}, reduce_concat={concat})")

    def encode(self) -> np.ndarray:
        """Per cell, node and edge slot: one-hot input (5) then one-hot op (7)."""
        vec = np.zeros((len(CELLS), NUM_NODES, 2, NUM_INPUTS + len(OPS)), dtype=np.float32)
        for c, name in enumerate(CELLS):
            for i, node in enumerate(self.cell(name)):
                for s, (op, src) in enumerate(node):
                    vec[c, i, s, src] = 1.0
                    vec[c, i, s, NUM_INPUTS + OPS.index(op)] = 1.0
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


def _edges(field: str, value: object) -> Cell:
    """Turn a flat list of 2*NUM_NODES (op, input) pairs into nodes (validated by DartsArch)."""
    if not isinstance(value, (list, tuple)):
        raise InvalidArchError(f"{field} must be a list of (op, input) pairs, got {type(value).__name__}")
    if len(value) != 2 * NUM_NODES:
        raise InvalidArchError(f"{field} needs {2 * NUM_NODES} (op, input) pairs ({NUM_NODES} nodes x 2), "
                               f"got {len(value)}")
    return tuple((value[2 * i], value[2 * i + 1]) for i in range(NUM_NODES))  # type: ignore[return-value]


def parse_genotype(text: str) -> DartsArch:
    """Parse `Genotype(normal=[...], normal_concat=[...], reduce=[...], reduce_concat=[...])` without eval.

    The text is only parsed into a syntax tree; field values are read with
    `ast.literal_eval`, so nothing in it is ever executed.
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
        if not isinstance(concat, (list, tuple)) or list(concat) != list(CONCAT):
            raise InvalidArchError(f"{cell}_concat must be {list(CONCAT)} (all {NUM_NODES} intermediate nodes), "
                                   f"got {_short(repr(concat))}")
    return DartsArch(normal=_edges("normal", values["normal"]), reduce=_edges("reduce", values["reduce"]))


# --- space -------------------------------------------------------------------------------------------------


def _input_pairs(node: int) -> list[tuple[int, int]]:
    """The unordered pairs of distinct states node `node` can read."""
    return list(itertools.combinations(range(node + 2), 2))


class DartsSpace(SearchSpace[DartsArch]):
    """DARTS genotypes on the CIFAR evaluation network with `C` initial channels and `layers` cells."""

    name = "darts"
    description = "DARTS normal+reduction cells (4 nodes, 2 inputs, 7 ops) on an 8-cell C=16 CIFAR net (Liu+ 2019)"
    default_input_size = 32

    def __init__(self, C: int = 16, layers: int = 8) -> None:
        if not (isinstance(C, int) and C >= 2):
            raise NasutilError(f"DARTS initial channels C must be an integer >= 2, got {C!r}")
        if not (isinstance(layers, int) and layers >= 1):
            raise NasutilError(f"DARTS layers must be an integer >= 1, got {layers!r}")
        self.C = C
        self.layers = layers

    @classmethod
    def from_option(cls, option: str) -> DartsSpace:
        """`C=36,layers=20` (either key may be left out) gives the paper's evaluation network."""
        usage = "expected comma-separated C=INT and/or layers=INT, e.g. darts:C=36,layers=20"
        if not option.strip():
            raise NasutilError(f"empty option for search space 'darts' ({usage})")
        kwargs: dict[str, int] = {}
        for item in option.split(","):
            key, sep, value = (part.strip() for part in item.partition("="))
            canonical = {"c": "C", "layers": "layers"}.get(key.lower())
            if not sep or canonical is None:
                raise NasutilError(f"bad DARTS option {item.strip()!r} ({usage})")
            if canonical in kwargs:
                raise NasutilError(f"DARTS option {canonical!r} given twice in {option!r}")
            try:
                kwargs[canonical] = int(value)
            except ValueError:
                raise NasutilError(f"DARTS option {canonical!r} needs an integer, got {value!r}") from None
        return cls(**kwargs)

    def sample(self, rng: np.random.Generator) -> DartsArch:
        """Uniform over the canonical genotypes: a uniform input pair per node, then a uniform op per edge."""
        cells = []
        for _ in CELLS:
            nodes = []
            for i in range(NUM_NODES):
                pairs = _input_pairs(i)
                a, b = pairs[int(rng.integers(len(pairs)))]
                op_a, op_b = (OPS[k] for k in rng.integers(len(OPS), size=2))
                nodes.append(((op_a, a), (op_b, b)))
            cells.append(tuple(nodes))
        return DartsArch(normal=cells[0], reduce=cells[1])

    def suggest(self, trial: optuna.Trial) -> DartsArch:
        """Per node: its input pair ("a-b", a < b), then the op on input a and the op on input b."""
        cells = []
        for cell in CELLS:
            nodes = []
            for i in range(NUM_NODES):
                choices = [f"{a}-{b}" for a, b in _input_pairs(i)]
                a, b = map(int, trial.suggest_categorical(f"{cell}_node{i}_inputs", choices).split("-"))
                op_a = trial.suggest_categorical(f"{cell}_node{i}_op_a", OPS)
                op_b = trial.suggest_categorical(f"{cell}_node{i}_op_b", OPS)
                nodes.append(((op_a, a), (op_b, b)))
            cells.append(tuple(nodes))
        return DartsArch(normal=cells[0], reduce=cells[1])

    def parse(self, text: str) -> DartsArch:
        return parse_genotype(text)

    def build(self, arch: DartsArch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        from nasutil_search_spaces.darts_network import DartsNetwork

        # The network pools globally, so it runs at any input size; `input_size` needs no change to it.
        return DartsNetwork(arch, C=self.C, layers=self.layers, num_classes=num_classes, in_channels=self.in_channels)

    @property
    def encoding_size(self) -> int:
        return len(CELLS) * NUM_NODES * 2 * (NUM_INPUTS + len(OPS))

    def size(self) -> int:
        """Per node C(i+2, 2) input pairs x 7^2 ops; multiplied over nodes, squared for the two cells."""
        per_cell = math.prod(math.comb(i + 2, 2) * len(OPS) ** 2 for i in range(NUM_NODES))
        return per_cell ** len(CELLS)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(C={self.C}, layers={self.layers})"
