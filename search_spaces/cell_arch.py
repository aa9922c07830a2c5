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
from nasutil.files import nesting_depth, read_text
from nasutil.space import MAX_FORWARD_VALUES, MAX_MAP_VALUES, MAX_NETWORK_PARAMS
from nasutil_search_spaces.cell_op_sizes import is_builtin, op_maps, op_params, OpMaps
from nasutil_search_spaces.darts_arch import OPS as DARTS_OPS
from nasutil_search_spaces.darts_arch import (DartsArch, GenotypeShape)
from nasutil_search_spaces.nb201 import OPS as NB201_OPS
from nasutil_search_spaces.nb201 import cell_string, parse_cell_string


MERGES = ("sum",)
REDUCTIONS = ("residual", "cell")
MAX_CHOSEN_INPUTS = 2  # the first node of a DARTS-style cell has two states to choose from
MAX_NODES = 8
MAX_CONFIG_BYTES = 64 * 1024


def edge_params_bound(c: int) -> int:
    """The most parameters one edge's built-in op holds at width `c`, at stride 1 or 2: a 3x3 convolution with
    its batch norm (9c^2 + 2c), or where c is small DARTS's 5x5 separable convolution (2c^2 + 54c). A plugin's
    op is counted as built instead (`CellConfig._edge_params`)."""
    return max(9 * c * c + 2 * c, 2 * c * c + 54 * c)


#: how many feature maps, each at most the edge's width and its input's size, a built-in op's modules output
#: (a ReLU, a convolution and a batch norm: three; DARTS's separable convolution: eight)
OP_MAPS = {"none": 1, "skip_connect": 4, "avg_pool_3x3": 1, "max_pool_3x3": 1, "nor_conv_1x1": 3,
           "nor_conv_3x3": 3, "dil_conv_3x3": 4, "dil_conv_5x5": 4, "sep_conv_3x3": 8, "sep_conv_5x5": 8}
#: the most a built-in op outputs (a plugin's op is counted as built: `cell_op_sizes.op_maps`)
MOST_OP_MAPS = max(OP_MAPS.values())


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

    def check_size(self, where: str, num_classes: int = 10, input_size: int | None = None) -> CellConfig:
        """Refuse, before anything is built, a network far larger than a search could train: the settings'
        ranges alone allow convolutions 131,072 channels wide, and feature maps of 4096 channels at 1024x1024
        (17 GB for one image)."""
        try:
            self._refuse_many_params(where, num_classes)
            self._refuse_large_maps(where, self.input_size if input_size is None else input_size, num_classes)
        except NasutilError as exc:
            if str(exc).startswith(f"{where}: "):
                raise
            raise NasutilError(f"{where}: {exc}") from None  # a plugin's op that could not be sized
        return self

    def _refuse_many_params(self, where: str, num_classes: int) -> None:
        """The weights alone: 2e9 parameters are 8 GB in fp32 before a single image is run."""
        bound = self.params_bound(num_classes)
        if bound > MAX_NETWORK_PARAMS:
            classes = "" if num_classes == 10 else f" with {num_classes:,} classes"
            heavy = self._heaviest_op()
            raise NasutilError(f"{where}: these settings allow networks of up to about {bound:.2g} parameters"
                               f"{classes}, over the {MAX_NETWORK_PARAMS:.2g} a cell space may build{heavy} (fewer "
                               f"channels, stages, nodes or cells{', or classes' if classes else ''}"
                               f"{', or a smaller op' if heavy else ''})")

    def _refuse_large_maps(self, where: str, size: int, num_classes: int) -> None:
        """One image's feature maps: one too large for memory fails at once, many at once fail a training."""
        values, widest = self.forward_values(size, num_classes), self.widest_map(size)
        if widest > MAX_MAP_VALUES:
            raise NasutilError(f"{where}: {self._widest_source(size)} feature maps of {widest:.2g} values "
                               f"({4 * widest / 1e9:.2g} GB in fp32 for one image), over the {MAX_MAP_VALUES:.2g} "
                               f"a cell space's may hold (fewer channels or a smaller input_size"
                               f"{'' if widest <= self._skeleton_widest(size) else ', or a smaller op'})")
        if values > MAX_FORWARD_VALUES:
            busy = self._busiest_op(size)
            raise NasutilError(f"{where}: a forward pass of one {size}x{size} image through these networks computes "
                               f"about {values:.2g} values ({4 * values / 1e9:.2g} GB in fp32), over the "
                               f"{MAX_FORWARD_VALUES:.2g} a cell space's may: {self._widest_source(size)} "
                               f"maps of {widest:.2g} values, and {self._multipliers()} multiply them{busy} (fewer "
                               f"channels or a smaller input_size, or fewer of those{', or a smaller op' if busy else ''})")

    def params_bound(self, num_classes: int = 10) -> float:
        """An upper bound on a network's parameters, counted as the builder builds it: the stem, each cell's
        edges at their largest op (`_edge_params`), the blocks or cells that halve the resolution, the
        two 1x1 convolutions a reduction-cell network's cells begin with, the head and its classifier."""
        if self.chosen:
            return float(self._chosen_params_bound(num_classes))
        c = self.channels
        total = 9 * self.in_channels * c + 2 * c  # the stem: a 3x3 convolution and its batch norm
        for stage in range(self.stages):
            if stage:  # ResidualReduction(c, 2c): 3x3 convolutions c->2c and 2c->2c, their batch norms, a 1x1 shortcut
                total += 56 * c * c + 8 * c
                c *= 2
            total += self.cells_per_stage * len(self.edges) * self._edge_params(c)
        return float(total + 2 * c + c * num_classes + num_classes)

    def _chosen_params_bound(self, num_classes: int) -> int:
        """DARTS's skeleton (`DartsNetwork`): the width doubles at the reduction cells, and each cell first
        brings its two inputs to its width by a 1x1 (or factorized) convolution with a batch norm."""
        c = self.channels
        stem = c * self.stem_multiplier
        total = 9 * self.in_channels * stem + 2 * stem
        c_prev_prev = c_prev = stem
        for layer in range(self.layers):
            if layer in (self.layers // 3, 2 * self.layers // 3):
                c *= 2
            total += (c_prev_prev + c_prev) * c + 4 * c + self.nodes * int(self.inputs) * self._edge_params(c)
            c_prev_prev, c_prev = c_prev, self.nodes * c
        return total + c_prev * num_classes + num_classes

    def _edge_params(self, c: int) -> int:
        """The most parameters one edge holds at width `c`: the built-in ops' `edge_params_bound`, or what a
        plugin's op holds built (at stride 1, and 2 where the space has reduction cells), whichever is more."""
        strides = (1, 2) if self.chosen else (1,)
        return max([edge_params_bound(c)] + [op_params(op, c, s) for op in self._plugin_ops() for s in strides])

    def _plugin_ops(self) -> tuple[str, ...]:
        """This space's ops that are not built in: sized as built (`cell_op_sizes`), not by formula."""
        return tuple(op for op in self.ops if not is_builtin(op))

    def forward_values(self, input_size: int, num_classes: int = 10) -> float:
        """An upper bound on the values a forward pass of one image computes, counted as the builder builds
        the network: every module's output (`OP_MAPS` per edge, a plugin's op as built) and every sum's.
        Memory grows with it, and no network need be built to know it."""
        if self.chosen:
            return float(self._chosen_forward_values(input_size, num_classes))
        size, c = input_size, self.channels
        total = 2 * c * size * size  # the stem's convolution and batch norm
        for stage in range(self.stages):
            if stage:  # ResidualReduction(c, 2c): a ReLU at the input, then 15 maps of at most c x half the size
                half = -(-size // 2)
                total += c * size * size + 15 * c * half * half
                c, size = 2 * c, half
            per_cell = len(self.edges) * (self._edge_maps(c, size, False).values + c * size * size)  # and a sum each
            total += self.cells_per_stage * per_cell
        return float(total + 2 * c * size * size + 2 * c + num_classes)  # the head

    def _chosen_forward_values(self, size: int, num_classes: int) -> int:
        """DARTS's skeleton: the stem's two maps, then in each cell the two inputs brought to its width (a
        ReLU at each input's width, two maps at the cell's), each edge's modules at its inputs' size, the
        sums of each node's edges, and the concatenation of the nodes."""
        c, stem = self.channels, self.channels * self.stem_multiplier
        total = 2 * stem * size * size
        c_prev_prev, c_prev, size_prev_prev, size_prev = stem, stem, size, size
        edges = self.nodes * int(self.inputs)
        for layer in range(self.layers):
            out, reduce = size_prev, layer in (self.layers // 3, 2 * self.layers // 3)
            if reduce:
                c, out = 2 * c, -(-size_prev // 2)
            total += (c_prev_prev + 2 * c) * size_prev_prev ** 2 + (c_prev + 2 * c) * size_prev ** 2
            total += edges * self._edge_maps(c, size_prev, reduce).values + (edges + self.nodes) * c * out * out
            c_prev_prev, c_prev, size_prev_prev, size_prev = c_prev, self.nodes * c, size_prev, out
        return total + c_prev + num_classes  # the pooling and the classifier

    def _edge_maps(self, c: int, size: int, reduce: bool) -> OpMaps:
        """The most values one edge's modules output, and the largest of its maps, at width `c` on a
        `size`x`size` input: the built-in ops' `OP_MAPS` maps of c x size x size, or a plugin's op as built (in
        a reduction cell at stride 2 on this input, and at stride 1 on its half)."""
        plugins = self._plugin_ops()
        maps = max((OP_MAPS[op] for op in self.ops if op not in plugins), default=0)
        found = [OpMaps(maps * c * size * size, 0)]
        for op in plugins:
            found += self._plugin_maps(op, c, size, reduce)
        return OpMaps(max(m.values for m in found), max(m.widest for m in found))

    @staticmethod
    def _plugin_maps(op: str, c: int, size: int, reduce: bool) -> list[OpMaps]:
        """A plugin's op at every stride and size an edge of width `c` runs it at, from a `size` input."""
        if not reduce:
            return [op_maps(op, c, 1, size)]
        return [op_maps(op, c, 1, size), op_maps(op, c, 2, size), op_maps(op, c, 1, -(-size // 2))]

    def _edge_runs(self, input_size: int) -> list[tuple[int, int, bool]]:
        """The widths, input sizes and kinds (a reduction cell's or not) the cells' edges run at."""
        runs: list[tuple[int, int, bool]] = []
        c, size = self.channels, input_size
        for layer in range(self.layers if self.chosen else self.stages):
            reduce = self.chosen and layer in (self.layers // 3, 2 * self.layers // 3)
            if reduce or (not self.chosen and layer):
                c *= 2
            if not self.chosen and layer:
                size = -(-size // 2)
            if (c, size, reduce) not in runs:
                runs.append((c, size, reduce))
            if reduce:
                size = -(-size // 2)
        return runs

    def _heaviest_op(self) -> str:
        """Where a plugin's op holds more than any built-in op at the widest cells, a note naming it."""
        c = self._edge_runs(self.input_size)[-1][0]
        strides = (1, 2) if self.chosen else (1,)
        held = [(op_params(op, c, s), op) for op in self._plugin_ops() for s in strides]
        if not held or max(held)[0] <= edge_params_bound(c):
            return ""
        params, op = max(held)
        return (f": op {op!r} holds {params:,} parameters per edge at {c} channels, more than a built-in op's "
                f"{edge_params_bound(c):,}")

    def _busiest_op(self, size: int) -> str:
        """Where a plugin's op outputs more values than any built-in op, a note naming it."""
        for c, run_size, reduce in self._edge_runs(size):
            most = MOST_OP_MAPS * c * run_size * run_size
            out = [(max(m.values for m in self._plugin_maps(op, c, run_size, reduce)), op)
                   for op in self._plugin_ops()]
            if out and max(out)[0] > most:
                values, op = max(out)
                return (f", and op {op!r} outputs {values:.2g} values per edge at {c} channels on {run_size}x"
                        f"{run_size}, more than a built-in op's {most:.2g}")
        return ""

    def widest_map(self, input_size: int) -> float:
        """The values of the largest feature map a forward pass of one image computes: the stem's with the
        residual block (each stage halves the size as it doubles the width); with reduction cells the
        largest of the stem's, a cell's inputs brought to its width, and its concatenated nodes; or a
        plugin op's largest map, where larger."""
        plugin = self._widest_op(input_size)
        return max(self._skeleton_widest(input_size), float(plugin[0]) if plugin else 0.0)

    def _skeleton_widest(self, input_size: int) -> float:
        """The largest map but the plugin ops' own."""
        if not self.chosen:
            return float(self.channels * input_size ** 2)
        c, size = self.channels, input_size
        widest = c_prev = self.stem_multiplier * c
        widest *= size * size
        for layer in range(self.layers):
            out = size
            if layer in (self.layers // 3, 2 * self.layers // 3):
                c, out = 2 * c, -(-size // 2)
            widest = max(widest, max(c_prev, c) * size * size, self.nodes * c * out * out)
            c_prev, size = self.nodes * c, out
        return float(widest)

    def _widest_op(self, input_size: int) -> tuple[int, str, int, int] | None:
        """A plugin op's largest map, its name, and the width and input size it is made at; None where the
        space has no plugin op."""
        found = [(m.widest, op, c, size) for c, size, reduce in self._edge_runs(input_size)
                 for op in self._plugin_ops() for m in self._plugin_maps(op, c, size, reduce)]
        return max(found) if found else None

    def _widest_source(self, size: int) -> str:
        """What makes the largest feature map, with its verb, for the errors that refuse it: the settings, or
        a plugin's op where its own maps are larger."""
        plugin = self._widest_op(size)
        if plugin and plugin[0] > self._skeleton_widest(size):
            _, op, c, run_size = plugin
            return f"op {op!r} at {c} channels on {run_size}x{run_size} makes"
        return f"{self._widest_settings(size)} make"

    def _widest_settings(self, size: int) -> str:
        """The settings that make the largest feature map, for the errors that refuse it."""
        width = f"channels {self.channels}"
        if self.chosen:
            width += f" (x stem_multiplier {self.stem_multiplier}, x nodes {self.nodes} or x 2 in a reduction cell)"
        return f"{width} at {size}x{size} (input_size)"

    def _multipliers(self) -> str:
        """The settings that multiply the feature maps, for the error that refuses their total."""
        if self.chosen:
            return f"nodes {self.nodes}, inputs {self.inputs} and layers {self.layers}"
        return f"nodes {self.nodes}, cells_per_stage {self.cells_per_stage} and stages {self.stages}"

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
        depth = nesting_depth(option)
        if depth > MAX_CONFIG_DEPTH:  # refused before the parser, which recursed into a RecursionError
            raise NasutilError(f"inline cell space settings nest {depth} levels deep, deeper than the "
                               f"{MAX_CONFIG_DEPTH} a cell space config may")
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
