"""Cell spaces from a YAML file without torch: the config and its checks, the arch and its string, and the ops
a network of them lists, shared by the space and its torch network."""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nasutil.arch import Arch
from nasutil.cell_ops import cell_op
from nasutil.errors import NasutilError
from nasutil.files import read_text
from nasutil.space import MAX_NETWORK_PARAMS
from nasutil_search_spaces.darts import OPS as DARTS_OPS
from nasutil_search_spaces.darts import (DartsArch, GenotypeShape)
from nasutil_search_spaces.nb201 import OPS as NB201_OPS
from nasutil_search_spaces.nb201 import cell_string, parse_cell_string


MERGES = ("sum",)
REDUCTIONS = ("residual", "cell")
MAX_CHOSEN_INPUTS = 2  # the first node of a DARTS-style cell has two states to choose from
MAX_NODES = 8
MAX_CONFIG_BYTES = 64 * 1024


@dataclass(frozen=True)
class CellConfig:
    """Everything that defines a generated space; `check` refuses what cannot make a working network."""

    nodes: int = 3  # all: nodes after the cell's input (node i takes 0..i-1); K: intermediate nodes
    ops: tuple[str, ...] = NB201_OPS
    merge: str = "sum"
    inputs: str | int = "all"  # every earlier node, or K chosen among the earlier states (DARTS)
    channels: int = 16
    stages: int = 3  # with the residual reduction block
    cells_per_stage: int = 5
    reduction: str = "residual"  # residual: NAS-Bench-201's block between stages; cell: DARTS's reduction cells
    layers: int = 8  # with reduction cells: cells in all
    stem_multiplier: int = 3  # with reduction cells: the stem's channels are this x channels
    input_size: int = 32
    in_channels: int = 3
    name: str = field(default="", compare=False)

    @property
    def chosen(self) -> bool:
        """DARTS-style: K chosen inputs, concatenated nodes, reduction cells."""
        return self.inputs != "all"

    @classmethod
    def from_dict(cls, data: Any, where: str) -> CellConfig:
        if not isinstance(data, dict):
            raise NasutilError(f"{where}: a cell space config must be a mapping of settings")
        known = {f for f in cls.__dataclass_fields__ if f != "name"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise NasutilError(f"{where}: unknown setting {unknown[0]!r} (known: {', '.join(sorted(known))})")
        values = dict(data)
        if "ops" in values:
            if not isinstance(values["ops"], (list, tuple)) or not all(isinstance(o, str) for o in values["ops"]):
                raise NasutilError(f"{where}: ops must be a list of op names")
            values["ops"] = tuple(values["ops"])
        return cls(**values, name=where).check(where)

    def check(self, where: str) -> CellConfig:
        for key, low, high in (("nodes", 1, MAX_NODES), ("channels", 1, 4096), ("stages", 1, 6),
                               ("cells_per_stage", 1, 64), ("input_size", 1, 1024), ("in_channels", 1, 64)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise NasutilError(f"{where}: {key} must be a whole number from {low} to {high}, got {value!r}")
        if self.inputs != "all" and (isinstance(self.inputs, bool) or not isinstance(self.inputs, int)
                                     or not 1 <= self.inputs <= MAX_CHOSEN_INPUTS):
            raise NasutilError(f"{where}: inputs must be 'all' (every earlier node) or how many earlier states a "
                               f"node chooses (1 or {MAX_CHOSEN_INPUTS}), got {self.inputs!r}")
        for key, low, high in (("layers", 1, 64), ("stem_multiplier", 1, 16)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise NasutilError(f"{where}: {key} must be a whole number from {low} to {high}, got {value!r}")
        if self.merge not in MERGES:
            raise NasutilError(f"{where}: merge must be one of {', '.join(MERGES)}, got {self.merge!r}")
        if self.reduction not in REDUCTIONS:
            raise NasutilError(f"{where}: reduction must be one of {', '.join(REDUCTIONS)}, "
                               f"got {self.reduction!r}")
        if not self.ops or len(set(self.ops)) != len(self.ops):
            raise NasutilError(f"{where}: ops must list at least one op, each once")
        ops = [cell_op(o) for o in self.ops]  # unknown names fail here, naming the known ones
        if all(o.zero for o in ops):
            raise NasutilError(f"{where}: every op in {list(self.ops)} outputs zeros, so every cell would be "
                               f"degenerate")
        if self.chosen != (self.reduction == "cell"):
            raise NasutilError(f"{where}: chosen inputs (inputs: K) go with reduction cells (reduction: cell), and "
                               f"inputs: all with the residual block; got inputs {self.inputs!r} with reduction "
                               f"{self.reduction!r}")
        if self.chosen:
            for op in ops:
                if op.zero or op.reduce is None:
                    why = "outputs zeros" if op.zero else "has no stride-2 form (CellOp.reduce)"
                    raise NasutilError(f"{where}: op {op.name!r} {why}, so it cannot be in a space with reduction "
                                       f"cells")
            return self.check_size(where)
        if self.input_size < 2 ** (self.stages - 1):
            raise NasutilError(f"{where}: input_size {self.input_size} is too small for {self.stages} stages")
        return self.check_size(where)

    def check_size(self, where: str) -> CellConfig:
        """Refuse, before anything is built, a network far larger than a search could train: the settings'
        ranges alone allow convolutions 131,072 channels wide."""
        bound = self.params_bound()
        if bound > MAX_NETWORK_PARAMS:
            raise NasutilError(f"{where}: these settings allow networks of up to about {bound:.2g} parameters, over "
                               f"the {MAX_NETWORK_PARAMS:.2g} a cell space may build (fewer channels, stages, nodes "
                               f"or cells)")
        return self

    def params_bound(self) -> float:
        """An upper bound on a network's parameters, counting every edge of every cell as a 3x3 convolution
        with its batch norm at the cell's width (more than any built-in op holds)."""
        per_cell = len(self.edges) * 9
        if self.chosen:  # DARTS's skeleton: channels double at the two reduction cells, from C x multiplier
            widest = self.channels * max(4, self.stem_multiplier)
            return float(self.layers * self.nodes * self.inputs * (9 * widest * widest + 2 * widest))
        return float(sum(self.cells_per_stage * (per_cell * (self.channels * 2 ** s) ** 2)
                         for s in range(self.stages)))

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """(to, from) in the order of the architecture string."""
        return tuple((i, j) for i in range(1, self.nodes + 1) for j in range(i))

    @property
    def identity(self) -> str:
        """A digest of the settings that shape the networks: architectures of two spaces never share a hash."""
        unused = {"layers", "stem_multiplier"} if not self.chosen else {"stages", "cells_per_stage"}
        settings = {k: v for k, v in asdict(self).items() if k != "name" and k not in unused}
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def shape(self) -> GenotypeShape:
        """A chosen-inputs space's genotypes: its nodes, inputs per node and ops."""
        return GenotypeShape(self.nodes, int(self.inputs), self.ops, label="cell")


NB201_PRESET = CellConfig(name="nb201")
DARTS_PRESET = CellConfig(nodes=4, ops=DARTS_OPS, inputs=2, channels=16, reduction="cell", layers=8,
                          stem_multiplier=3, input_size=32, in_channels=3, name="darts")
PRESETS = {"nb201": NB201_PRESET, "darts": DARTS_PRESET}


@dataclass(frozen=True)
class CellArch(Arch):
    """The op on each edge, in `CellConfig.edges` order."""

    ops: tuple[str, ...]
    config: CellConfig = field(repr=False)
    space = "cell"

    def to_string(self) -> str:
        return cell_string(self.ops, self.config.nodes)

    def canonical_key(self) -> str:
        """Equal for isomorphic cells: those that differ only by the numbering of their intermediate nodes
        (sum is commutative, so renumbering nodes that no edge orders changes neither the network's
        function nor its cost). The key is the smallest cell string over every renumbering that keeps
        each working edge pointing forward; `none` edges carry nothing and constrain nothing."""
        return f"{self.config.identity}:{canonical_cell_string(self.ops, self.config.nodes)}"

    def encode(self) -> np.ndarray:
        vec = np.zeros((len(self.ops), len(self.config.ops)), dtype=np.float32)
        for e, op in enumerate(self.ops):
            vec[e, self.config.ops.index(op)] = 1.0
        return vec.ravel()


@dataclass(frozen=True)
class ChosenCellArch(DartsArch):
    """A DARTS-style genotype of a generated space: a normal and a reduction cell, each node's (op,
    input) edges sorted by input (the sum is commutative, so the order of a node's edges is not kept)."""

    config: CellConfig = field(default=DARTS_PRESET, repr=False, compare=False)
    space = "cell"

    def canonical_key(self) -> str:
        return f"{self.config.identity}:{self.to_string()}"


def canonical_cell_string(ops: tuple[str, ...], nodes: int) -> str:
    """The smallest cell string among the renumberings of nodes 1..nodes-1 (the input, 0, and the
    output, `nodes`, stay) under which every edge that is not `none` still runs from a lower node to
    a higher one."""
    edges = [(i, j) for i in range(1, nodes + 1) for j in range(i)]
    op_of = dict(zip(edges, ops))
    best = cell_string(ops, nodes)
    for order in itertools.permutations(range(1, nodes)):
        new = {0: 0, nodes: nodes, **{old: k + 1 for k, old in enumerate(order)}}
        moved: dict[tuple[int, int], str] = {}
        for (i, j), op in op_of.items():
            a, b = new[i], new[j]
            if op != "none" and b >= a:
                break
            moved[(max(a, b), min(a, b))] = op
        else:
            best = min(best, cell_string(tuple(moved[e] for e in edges), nodes))
    return best


def parse_arch(text: str, config: CellConfig) -> CellArch:
    return CellArch(parse_cell_string(text, config.nodes, config.ops, "generated"), config)


def load_config(option: str) -> CellConfig:
    """`nb201` (a preset), a YAML/JSON file of settings, or the settings inline as a JSON object (what
    `nasutil-search search_space=cell search_space.settings.nodes=4` passes)."""
    if option in PRESETS:
        return PRESETS[option]
    if option.lstrip().startswith("{"):
        if len(option) > MAX_CONFIG_BYTES:
            raise NasutilError(f"inline cell space settings are longer than {MAX_CONFIG_BYTES // 1024} KiB")
        try:
            data = json.loads(option, object_pairs_hook=_dict_of_distinct_keys)
        except json.JSONDecodeError as exc:
            raise NasutilError(f"cannot read inline cell space settings: {exc}") from None
        return CellConfig.from_dict(data, "search_space.settings")
    path = Path(option).expanduser()
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise NasutilError(f"cell space option {option!r} is neither a preset ({', '.join(PRESETS)}) "
                           f"nor a .yaml/.json file")
    if not path.exists():
        raise NasutilError(f"cell space config {str(path)!r} does not exist")
    import yaml

    try:
        data = _bounded_yaml(read_text(path, "cell space config", MAX_CONFIG_BYTES), str(path))
    except yaml.YAMLError as exc:
        raise NasutilError(f"cannot read cell space config {str(path)!r}: {_yaml_problem(exc)}") from None
    return CellConfig.from_dict(data, str(path))


def _dict_of_distinct_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise NasutilError(f"inline cell space settings give the key {twice[0][:40]!r} twice; keep one")
    return dict(pairs)


def _yaml_problem(exc: Exception) -> str:
    """PyYAML's problem and where it is (its first line alone named neither: "while parsing a flow sequence")."""
    problem, mark = getattr(exc, "problem", None), getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


#: the deepest nesting and the most values (aliases counted as often as they are used) a config may hold
MAX_CONFIG_DEPTH = 32
MAX_CONFIG_VALUES = 100_000


def _bounded_yaml(text: str, where: str) -> object:
    """Plain YAML data (no tags that construct objects), refused before it is built where it nests deeper
    than MAX_CONFIG_DEPTH or would expand, aliases included, to more than MAX_CONFIG_VALUES values: a
    few hundred bytes of aliases can otherwise stand for billions of them."""
    import yaml

    class Loader(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):  # noqa: ANN001 (PyYAML's signature)
            self.depth += 1
            if self.depth > MAX_CONFIG_DEPTH:
                raise NasutilError(f"cell space config {where!r} nests deeper than {MAX_CONFIG_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):  # PyYAML's signature
            _refuse_duplicate_keys(self, node, where)
            return super().construct_mapping(node, deep)

    loader = Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        if _expanded_size(root) > MAX_CONFIG_VALUES:
            raise NasutilError(f"cell space config {where!r} expands to more than {MAX_CONFIG_VALUES:,} values "
                               f"(aliases counted as often as they are used)")
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _refuse_duplicate_keys(loader: object, node: object, where: str) -> None:
    """A key given twice in one mapping is refused: YAML loaders keep the last silently, so a second
    `channels:` left in a file replaced the first without a word. Keys that a merge (`<<`) brings in may
    be overridden, as YAML intends."""
    import yaml

    seen: set[object] = set()
    for key_node, _ in node.value:  # type: ignore[attr-defined]
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)  # type: ignore[attr-defined]
        if key in seen:
            line = key_node.start_mark.line + 1
            raise NasutilError(f"cell space config {where!r} gives the key {str(key)[:40]!r} twice in one mapping "
                               f"(again on line {line}); keep one")
        seen.add(key)


def _expanded_size(root: object) -> int:
    """How many values a YAML node graph stands for once every alias is replaced by what it names: each
    node sized once (post-order, without recursion), a use of it counted each time."""
    import yaml

    def children(node: object) -> list:
        if isinstance(node, yaml.MappingNode):
            return [part for pair in node.value for part in pair]
        return list(node.value) if isinstance(node, yaml.SequenceNode) else []

    sizes: dict[int, int] = {}
    stack: list[tuple[object, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if id(node) in sizes and not ready:
            continue
        if ready:
            sizes[id(node)] = min(1 + sum(sizes.get(id(c), 0) for c in children(node)), 1 << 62)
            continue
        sizes[id(node)] = 0  # placeholder: a node inside itself adds nothing more
        stack.append((node, True))
        stack.extend((c, False) for c in children(node) if id(c) not in sizes)
    return sizes[id(root)]
