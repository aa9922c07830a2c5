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

from typing import TYPE_CHECKING

import numpy as np

from nasutil.errors import NasutilError
from nasutil.lazy_imports import lazy_attributes
from nasutil.space import MAX_FORWARD_VALUES, MAX_MAP_VALUES, MAX_NETWORK_PARAMS, SearchSpace
from nasutil_search_spaces.darts_arch import (  # noqa: F401 (this module is their face)
    Cell, CELLS, DARTS_OPS, DARTS_SHAPE, DartsArch, Edge, genotype_count, genotype_encoding_size, GenotypeShape,
    input_sets, Node, NUM_NODES, OPS, parse_genotype, sample_cells, suggest_cells,
)

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

# The torch modules live in `darts_network`; these names still resolve here, importing torch on first use.
NETWORK_NAMES = ("FactorizedReduce", "SepConv", "DilConv", "make_op", "DartsCell", "DartsNetwork")
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(NETWORK_NAMES, "nasutil_search_spaces.darts_network"))


#: the most cells a DARTS network may stack (the paper's deepest evaluation network has 20)
MAX_LAYERS = 256


def params_bound(C: int, layers: int) -> float:
    """An upper bound on the parameters of a DARTS network but its classifier: the stem, and in every cell
    its two 1x1 preprocessing convolutions from up to four times its width and all 8 edges as 5x5
    separable convolutions (the largest op), the width doubling at the reduction cells."""
    total, width = 27.0 * 3 * C, float(C)
    for layer in range(layers):
        if layer in (layers // 3, 2 * layers // 3):
            width *= 2
        total += 8 * 2 * (25 * width + width * width + 2 * width) + 2 * (4 * width * width + 2 * width)
    return total


class DartsSpace(SearchSpace[DartsArch]):
    """DARTS genotypes on the CIFAR evaluation network with `C` initial channels and `layers` cells."""

    name = "darts"
    description = "DARTS normal+reduction cells (4 nodes, 2 inputs, 7 ops) on an 8-cell C=16 CIFAR net (Liu+ 2019)"
    default_input_size = 32

    def __init__(self, C: int = 16, layers: int = 8) -> None:
        if not (isinstance(C, int) and not isinstance(C, bool) and C >= 2):
            raise NasutilError(f"DARTS initial channels C must be an integer >= 2, got {C!r}")
        if not (isinstance(layers, int) and not isinstance(layers, bool) and 1 <= layers <= MAX_LAYERS):
            raise NasutilError(f"DARTS layers must be an integer from 1 to {MAX_LAYERS}, got {layers!r}")
        bound = params_bound(C, layers)
        if bound > MAX_NETWORK_PARAMS:  # refused unbuilt: C=10**20 overflowed inside torch, and C=100000 took 120 GB
            raise NasutilError(f"darts:C={C},layers={layers} allows networks of up to about {bound:.2g} parameters, "
                               f"over the {MAX_NETWORK_PARAMS:.2g} a space may build (fewer channels or layers)")
        self.C = C
        self.layers = layers
        self.check_maps(self.default_input_size)

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
        normal, reduce = sample_cells(rng, DARTS_SHAPE)
        return DartsArch(normal=normal, reduce=reduce)

    def suggest(self, trial: optuna.Trial) -> DartsArch:
        """Per node: its input pair ("a-b", a < b), then the op on input a and the op on input b."""
        normal, reduce = suggest_cells(trial, DARTS_SHAPE)
        return DartsArch(normal=normal, reduce=reduce)

    def parse(self, text: str) -> DartsArch:
        return parse_genotype(text)

    def check_maps(self, input_size: int, num_classes: int = 10) -> None:
        """Refuse, unbuilt, networks whose feature maps for one image are too large at `input_size`: the
        parameters do not grow with it, but the maps do (C=64 at 1024x1024 makes 1 GB maps, and a forward pass
        of one image tens of GB). Bounded as the `cell:darts` preset's networks, which these are."""
        from dataclasses import replace

        from nasutil_search_spaces.cell_arch import DARTS_PRESET

        config = replace(DARTS_PRESET, channels=self.C, layers=self.layers, in_channels=self.in_channels)
        values, widest = config.forward_values(input_size, num_classes), config.widest_map(input_size)
        where = f"darts:C={self.C},layers={self.layers} at input size {input_size}"
        if widest > MAX_MAP_VALUES:
            raise NasutilError(f"{where} makes feature maps of {widest:.2g} values ({4 * widest / 1e9:.2g} GB in fp32 "
                               f"for one image), over the {MAX_MAP_VALUES:.2g} a space's may hold (fewer channels "
                               f"or a smaller input size)")
        if values > MAX_FORWARD_VALUES:
            raise NasutilError(f"{where}: a forward pass of one image computes about {values:.2g} values "
                               f"({4 * values / 1e9:.2g} GB in fp32), over the {MAX_FORWARD_VALUES:.2g} a space's "
                               f"may (fewer channels or layers, or a smaller input size)")

    def build(self, arch: DartsArch, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        num_classes = self.check_num_classes(num_classes)
        self.check_maps(self.default_input_size if input_size is None else input_size, num_classes)
        from nasutil_search_spaces.darts_network import DartsNetwork

        # The network pools globally, so it runs at any input size; `input_size` needs no change to it.
        return DartsNetwork(arch, C=self.C, layers=self.layers, num_classes=num_classes, in_channels=self.in_channels)

    @property
    def encoding_size(self) -> int:
        return genotype_encoding_size(DARTS_SHAPE)

    def size(self) -> int:
        """Per node C(i+2, 2) input pairs x 7^2 ops; multiplied over nodes, squared for the two cells."""
        return genotype_count(DARTS_SHAPE)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(C={self.C}, layers={self.layers})"
