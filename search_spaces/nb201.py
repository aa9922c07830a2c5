"""NAS-Bench-201: the canonical network and its 15,625 cells.

Network (Dong & Yang, ICLR 2020): a 3x3 conv stem, three stages of N=5 cells at
C=16/32/64 joined by residual reduction blocks, BN+ReLU, global pooling and a
linear classifier. A cell is a 4-node DAG; each of its 6 edges carries one of 5
ops. Every op is computed, `none` included, as in the reference implementation,
so FLOPs match the canonical network for the same cell.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from nasutil.ops import Op
from nasutil.lazy_imports import lazy_attributes
from nasutil.space import SearchSpace
from nasutil_search_spaces.nb201_arch import (  # noqa: F401 (this module is their face)
    _cell_ops, cell_string, EDGES, NB201Arch, network_ops, NUM_NODES, OPS, parse_cell, parse_cell_string,
    relu_conv_bn_ops,
)

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

# The torch modules live in `nb201_network`; these names still resolve here, importing torch on first use.
NETWORK_NAMES = ("Cell", "ResidualReduction", "NB201Network")
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(NETWORK_NAMES, "nasutil_search_spaces.nb201_network"))


class NasBench201Space(SearchSpace[NB201Arch]):
    name = "nb201"
    description = "NAS-Bench-201 cells: 6 edges x 5 ops, 15,625 cells, C=16 network (Dong & Yang 2020)"
    default_input_size = 32

    def sample(self, rng: np.random.Generator) -> NB201Arch:
        return NB201Arch(tuple(OPS[i] for i in rng.integers(len(OPS), size=len(EDGES))))

    def suggest(self, trial: optuna.Trial) -> NB201Arch:
        return NB201Arch(tuple(trial.suggest_categorical(f"edge_{i}<-{j}", OPS) for i, j in EDGES))

    def parse(self, text: str) -> NB201Arch:
        return parse_cell(text)

    def build(self, arch: NB201Arch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        num_classes = self.check_num_classes(num_classes)
        from nasutil_search_spaces.nb201_network import NB201Network

        return NB201Network(arch, num_classes=num_classes, in_channels=self.in_channels)

    def operators(self, arch: NB201Arch, num_classes: int = 10, input_size: int | None = None) -> list[Op]:
        """`NB201Network`'s ops, listed without building it (equal to tracing it; tested)."""
        size = self.default_input_size if input_size is None else input_size
        return network_ops(lambda c, s: _cell_ops(arch, c, s), self.in_channels, 16, 3, 5, size, num_classes)

    @property
    def encoding_size(self) -> int:
        return len(EDGES) * len(OPS)

    def size(self) -> int:
        return len(OPS) ** len(EDGES)

    def enumerate(self) -> Iterator[NB201Arch]:
        for ops in itertools.product(OPS, repeat=len(EDGES)):
            yield NB201Arch(ops)
