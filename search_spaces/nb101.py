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

from typing import TYPE_CHECKING

import numpy as np

from nasutil.errors import InvalidArchError
from nasutil.lazy_imports import lazy_attributes
from nasutil.space import SearchSpace
from nasutil_search_spaces.nb101_arch import (  # noqa: F401 (this module is their face)
    ALL_EDGES, BN_EPS, BN_MOMENTUM, check_spec, ENCODING_SIZE, graph_hash, INPUT, Matrix, MAX_EDGES, MAX_NODES,
    NB101Arch, NUM_GRAPHS, OPS, OUTPUT, parse_cell, prune, vertex_channels,
)

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

# The torch modules live in `nb101_network`; these names still resolve here, importing torch on first use.
NETWORK_NAMES = ("ConvBNReLU", "NB101Cell", "NB101Network")
__getattr__, __dir__ = lazy_attributes(__name__, dict.fromkeys(NETWORK_NAMES, "nasutil_search_spaces.nb101_network"))


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
        num_classes = self.check_num_classes(num_classes)
        from nasutil_search_spaces.nb101_network import NB101Network

        # Fully convolutional up to global pooling, so any input size works.
        return NB101Network(arch, num_classes=num_classes, in_channels=self.in_channels)

    @property
    def encoding_size(self) -> int:
        return ENCODING_SIZE

    def size(self) -> int:
        return NUM_GRAPHS
