"""The built-in cell ops (NAS-Bench-201's five), registered under `nasutil.cell_ops` like a plugin's.

Each lists exactly what the `nb201` network launches for it, so a generated space's op listing and
predictions equal the dedicated space's.
"""

from __future__ import annotations

from nasutil.cell_ops import CellOp
from nasutil.ops import Op
from nasutil_search_spaces.nb201 import relu_conv_bn_ops


def _same(family: str, c: int, size: int, variant: str = "", **extra) -> Op:
    return Op(family, c, size, size, c, size, size, variant=variant, **extra)


def _build_zero(c: int):
    from nasutil_search_spaces._blocks import Zero

    return Zero()


def _build_identity(c: int):
    import torch.nn as nn

    return nn.Identity()


def _build_relu_conv_bn(kernel: int):
    def build(c: int):
        from nasutil_search_spaces._blocks import ReLUConvBN

        return ReLUConvBN(c, c, kernel, 1, kernel // 2)

    return build


def _build_avg_pool(c: int):
    import torch.nn as nn

    return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)


NONE = CellOp("none", _build_zero, lambda c, size: [_same("scale", c, size, "zero")], zero=True)
SKIP_CONNECT = CellOp("skip_connect", _build_identity, lambda c, size: [])
NOR_CONV_1X1 = CellOp("nor_conv_1x1", _build_relu_conv_bn(1), lambda c, size: relu_conv_bn_ops(c, c, size, 1, 1),
                      has_params=True)
NOR_CONV_3X3 = CellOp("nor_conv_3x3", _build_relu_conv_bn(3), lambda c, size: relu_conv_bn_ops(c, c, size, 3, 1),
                      has_params=True)
AVG_POOL_3X3 = CellOp("avg_pool_3x3", _build_avg_pool,
                      lambda c, size: [_same("pool", c, size, "avg", kernel=3, stride=1)])
