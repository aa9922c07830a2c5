"""A third-party cell op, as a plugin package ships one: a 3x3 max pool that keeps the resolution."""

from nasutil.cell_ops import CellOp
from nasutil.ops import Op


def _build(channels):
    import torch.nn as nn

    return nn.MaxPool2d(3, stride=1, padding=1)


MAX_POOL_3X3 = CellOp("tiny_max_pool_3x3", _build,
                      lambda c, size: [Op("pool", c, size, size, c, size, size, kernel=3, stride=1, variant="max")])
