"""Third-party cell ops, as a plugin package ships them: a 3x3 max pool that keeps the resolution, and an
11x11 convolution through a hidden layer eight times as wide, far larger than any built-in op."""

from nasutil.cell_ops import CellOp
from nasutil.ops import Op


def _build(channels):
    import torch.nn as nn

    return nn.MaxPool2d(3, stride=1, padding=1)


def _wide_conv(channels, stride=1):
    from torch import nn

    hidden = 8 * channels
    return nn.Sequential(nn.ReLU(), nn.Conv2d(channels, hidden, 11, stride, 5, bias=False), nn.BatchNorm2d(hidden),
                         nn.ReLU(), nn.Conv2d(hidden, channels, 11, 1, 5, bias=False), nn.BatchNorm2d(channels))


MAX_POOL_3X3 = CellOp("tiny_max_pool_3x3", _build,
                      lambda c, size: [Op("pool", c, size, size, c, size, size, kernel=3, stride=1, variant="max")])
WIDE_CONV_11X11 = CellOp("tiny_wide_conv_11x11", _wide_conv, None, has_params=True,
                         reduce=lambda channels: _wide_conv(channels, 2))
