"""`cell`: cell-based search spaces generated from a config, with NAS-Bench-201 as a preset.

A config says how many nodes a cell has, which ops an edge may carry (any registered in
`nasutil.cell_ops`, a plugin's included), how a node chooses its inputs, how it merges them, and the
network around the cells, the input size and channels. Two kinds:

- `inputs: all` (NAS-Bench-201): node i sums an op of every earlier node, the cell's output is its
  last node, and a residual reduction block separates stages of `cells_per_stage` cells.
  Architectures print like NAS-Bench-201 cells with as many nodes as the config has:
  `|op~0|+|op~0|op~1|+|...`.
- `inputs: K` with `reduction: cell` (DARTS): a cell reads the two previous cells' outputs; node i sums
  K ops applied to K distinct earlier states; the cell's output concatenates its nodes; a normal and
  a reduction cell (its edges from the cell inputs at stride 2) each have their own genotype, on the
  DARTS evaluation skeleton (`layers` cells, reduction cells at a third and two thirds of them, a stem
  of `stem_multiplier` x `channels`). Architectures print as DARTS genotypes.

    nasutil sample cell:nb201 -n 5                 # the NAS-Bench-201 preset
    nasutil sample cell:darts -n 5                 # the DARTS preset
    nasutil sample cell:my_space.yaml -n 5          # a space of your own (see the README)
 The networks, op listings, encodings and enumeration of `cell:nb201` equal
those of the dedicated `nb201` space. Isomorphic cells (the same cell with its intermediate nodes
numbered otherwise) share one canonical hash, so a search or a cache treats them as one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from nasutil.cell_ops import cell_op
from nasutil.ops import Op
from nasutil.space import SearchSpace
from nasutil_search_spaces.darts import (GenotypeShape, genotype_count, genotype_encoding_size, input_sets,
                                         parse_genotype, sample_cells, suggest_cells)
from nasutil_search_spaces.nb201 import network_ops
from nasutil_search_spaces.cell_arch import (  # noqa: F401 (this module is their face)
    canonical_cell_string, CellArch, CellConfig, ChosenCellArch, DARTS_PRESET, load_config, MAX_CHOSEN_INPUTS,
    MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH, MAX_CONFIG_VALUES, MAX_NETWORK_PARAMS, MAX_NODES, MERGES, NB201_PRESET,
    parse_arch, PRESETS, REDUCTIONS,
)

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn


class CellSpace(SearchSpace[CellArch]):
    name = "cell"
    description = ("cell spaces generated from a config: nodes, chosen or all inputs, ops (a plugin's too), "
                   "reduction blocks or cells; cell:nb201, cell:darts or cell:FILE.yaml")
    default_input_size = 32

    def __init__(self, config: CellConfig = NB201_PRESET) -> None:
        self.config = config
        self.default_input_size = config.input_size
        self.in_channels = config.in_channels

    @classmethod
    def from_option(cls, option: str) -> CellSpace:
        return cls(load_config(option))

    @property
    def fingerprint(self) -> str:
        return self.config.identity

    @classmethod
    def option_version(cls, option: str) -> object:
        path = Path(option).expanduser()
        if option in PRESETS or option.lstrip().startswith("{") or not path.is_file():
            return None
        stat = path.stat()
        return stat.st_mtime_ns, stat.st_size

    def sample(self, rng: np.random.Generator) -> CellArch | ChosenCellArch:
        if self.config.chosen:
            normal, reduce = sample_cells(rng, self.config.shape)
            return ChosenCellArch(normal, reduce, self.config.shape, self.config)
        ops = self.config.ops
        return CellArch(tuple(ops[i] for i in rng.integers(len(ops), size=len(self.config.edges))), self.config)

    def suggest(self, trial: optuna.Trial) -> CellArch | ChosenCellArch:
        if self.config.chosen:
            normal, reduce = suggest_cells(trial, self.config.shape)
            return ChosenCellArch(normal, reduce, self.config.shape, self.config)
        return CellArch(tuple(trial.suggest_categorical(f"edge_{i}<-{j}", self.config.ops)
                              for i, j in self.config.edges), self.config)

    def parse(self, text: str) -> CellArch | ChosenCellArch:
        if self.config.chosen:
            return parse_genotype(text, self.config.shape, ChosenCellArch, config=self.config)
        return parse_arch(text, self.config)

    def build(self, arch: CellArch | ChosenCellArch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        num_classes = self.check_num_classes(num_classes)
        # the config was checked at its own input size and ten classes; the network is built for these
        self.config.check_size(self.config.name or "cell space", num_classes, input_size)
        if self.config.chosen:
            from nasutil_search_spaces.cell_network import chosen_network

            return chosen_network(arch, self.config, num_classes)
        from nasutil_search_spaces.cell_network import CellNetwork

        return CellNetwork(arch.ops, self.config, num_classes)

    def operators(self, arch: CellArch | ChosenCellArch, num_classes: int = 10,
                  input_size: int | None = None) -> list[Op]:
        """The network's ops listed from the config and the ops' own listings, without building it; traced
        from the built network where an op has no listing, and for chosen-inputs spaces."""
        if self.config.chosen or any(cell_op(o).listing is None for o in self.config.ops):
            return super().operators(arch, num_classes, input_size)
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
        if self.config.chosen:
            return genotype_encoding_size(self.config.shape)
        return len(self.config.edges) * len(self.config.ops)

    def size(self) -> int:
        if self.config.chosen:
            return genotype_count(self.config.shape)
        return len(self.config.ops) ** len(self.config.edges)

    def enumerate(self) -> Iterator[CellArch | ChosenCellArch]:
        if self.config.chosen:
            shape = self.config.shape
            cells = list(_chosen_cells(shape)) if genotype_count(shape) <= 10 ** 6 else None
            for normal in (cells if cells is not None else _chosen_cells(shape)):
                for reduce in (cells if cells is not None else _chosen_cells(shape)):
                    yield ChosenCellArch(normal, reduce, shape, self.config)
            return
        for ops in itertools.product(self.config.ops, repeat=len(self.config.edges)):
            yield CellArch(ops, self.config)


def _chosen_cells(shape: GenotypeShape) -> Iterator[tuple]:
    """Every canonical cell of a chosen-inputs shape: per node an input set, then an op per input."""
    per_node = [[tuple(zip(ops, inputs)) for inputs in input_sets(i, shape.inputs)
                 for ops in itertools.product(shape.ops, repeat=shape.inputs)] for i in range(shape.nodes)]
    yield from itertools.product(*per_node)

