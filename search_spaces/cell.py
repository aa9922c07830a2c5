"""`cell`: cell-based search spaces generated from a config, with NAS-Bench-201 as a preset.

A config says how many nodes follow the cell's input, which ops an edge may carry (any registered in
`nasutil.cell_ops`, a plugin's included), how a node merges its inputs, and the network around the
cells (stem channels, stages, cells per stage, the residual reduction block between stages), the input
size and channels. Every node takes every earlier node as an input, as in NAS-Bench-201; the cell's
output is its last node.

    nasutil sample cell:nb201 -n 5                 # the NAS-Bench-201 preset
    nasutil sample cell:my_space.yaml -n 5          # a space of your own (see the README)

An architecture prints like a NAS-Bench-201 cell with as many nodes as the config has:
`|op~0|+|op~0|op~1|+|...`. The networks, op listings, encodings and enumeration of `cell:nb201` equal
those of the dedicated `nb201` space. Isomorphic cells (the same cell with its intermediate nodes
numbered otherwise) share one canonical hash, so a search or a cache treats them as one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nasutil.arch import Arch
from nasutil.cell_ops import cell_op
from nasutil.errors import NasutilError
from nasutil.ops import Op
from nasutil.space import SearchSpace
from nasutil_search_spaces.nb201 import OPS as NB201_OPS
from nasutil_search_spaces.nb201 import cell_string, network_ops, parse_cell_string

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

MERGES = ("sum",)
REDUCTIONS = ("residual",)
MAX_NODES = 8
MAX_CONFIG_BYTES = 64 * 1024


@dataclass(frozen=True)
class CellConfig:
    """Everything that defines a generated space; `check` refuses what cannot make a working network."""

    nodes: int = 3  # nodes after the cell's input; node i takes nodes 0..i-1
    ops: tuple[str, ...] = NB201_OPS
    merge: str = "sum"
    inputs: str = "all"  # every earlier node (the only choice so far)
    channels: int = 16
    stages: int = 3
    cells_per_stage: int = 5
    reduction: str = "residual"
    input_size: int = 32
    in_channels: int = 3
    name: str = field(default="", compare=False)

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
        if self.inputs != "all":
            raise NasutilError(f"{where}: inputs must be 'all' (every earlier node), got {self.inputs!r}")
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
        if self.input_size < 2 ** (self.stages - 1):
            raise NasutilError(f"{where}: input_size {self.input_size} is too small for {self.stages} stages")
        return self

    @property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """(to, from) in the order of the architecture string."""
        return tuple((i, j) for i in range(1, self.nodes + 1) for j in range(i))

    @property
    def identity(self) -> str:
        """A digest of the settings that shape the networks: architectures of two spaces never share a hash."""
        settings = {k: v for k, v in asdict(self).items() if k != "name"}
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


NB201_PRESET = CellConfig(name="nb201")
PRESETS = {"nb201": NB201_PRESET}


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
            data = json.loads(option)
        except json.JSONDecodeError as exc:
            raise NasutilError(f"cannot read inline cell space settings: {exc}") from None
        return CellConfig.from_dict(data, "search_space.settings")
    path = Path(option).expanduser()
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise NasutilError(f"cell space option {option!r} is neither a preset ({', '.join(PRESETS)}) "
                           f"nor a .yaml/.json file")
    if not path.is_file():
        raise NasutilError(f"cell space config {str(path)!r} does not exist")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise NasutilError(f"cell space config {str(path)!r} is larger than {MAX_CONFIG_BYTES // 1024} KiB")
    import yaml

    try:
        data = yaml.safe_load(path.read_text())  # plain data only: no tags that construct objects
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise NasutilError(f"cannot read cell space config {str(path)!r}: {str(exc).splitlines()[0]}") from None
    return CellConfig.from_dict(data, str(path))


class CellSpace(SearchSpace[CellArch]):
    name = "cell"
    description = ("cell spaces generated from a config: nodes, ops (a plugin's too), stages; "
                   "cell:nb201 or cell:FILE.yaml")
    default_input_size = 32

    def __init__(self, config: CellConfig = NB201_PRESET) -> None:
        self.config = config
        self.default_input_size = config.input_size
        self.in_channels = config.in_channels

    @classmethod
    def from_option(cls, option: str) -> CellSpace:
        return cls(load_config(option))

    def sample(self, rng: np.random.Generator) -> CellArch:
        ops = self.config.ops
        return CellArch(tuple(ops[i] for i in rng.integers(len(ops), size=len(self.config.edges))), self.config)

    def suggest(self, trial: optuna.Trial) -> CellArch:
        return CellArch(tuple(trial.suggest_categorical(f"edge_{i}<-{j}", self.config.ops)
                              for i, j in self.config.edges), self.config)

    def parse(self, text: str) -> CellArch:
        return parse_arch(text, self.config)

    def build(self, arch: CellArch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        from nasutil_search_spaces.cell_network import CellNetwork

        return CellNetwork(arch.ops, self.config, num_classes)

    def operators(self, arch: CellArch, num_classes: int = 10, input_size: int | None = None) -> list[Op]:
        """The network's ops listed from the config and the ops' own listings, without building it."""
        size = self.default_input_size if input_size is None else input_size
        cfg = self.config
        return network_ops(lambda c, s: self._cell_ops(arch, c, s), self.in_channels, cfg.channels, cfg.stages,
                           cfg.cells_per_stage, size, num_classes)

    def _cell_ops(self, arch: CellArch, c: int, size: int) -> list[Op]:
        ops: list[Op] = []
        for (i, j), name in zip(self.config.edges, arch.ops):
            ops += cell_op(name).listing(c, size)
            # the sum starts from Python's 0: one `0 + x`, then an addition per further input
            family, variant = ("scale", "add") if j == 0 else ("add", "")
            ops.append(Op(family, c, size, size, c, size, size, variant=variant))
        return ops

    @property
    def encoding_size(self) -> int:
        return len(self.config.edges) * len(self.config.ops)

    def size(self) -> int:
        return len(self.config.ops) ** len(self.config.edges)

    def enumerate(self) -> Iterator[CellArch]:
        for ops in itertools.product(self.config.ops, repeat=len(self.config.edges)):
            yield CellArch(ops, self.config)

