"""The built-in cell ops, registered under `nasutil.cell_ops` like a plugin's: NAS-Bench-201's five and
DARTS's seven (two names are shared: `skip_connect` and `avg_pool_3x3` are the same modules in both).

NAS-Bench-201's ops list exactly what the `nb201` network launches for them, so a generated space's op
listing and predictions equal the dedicated space's; DARTS's separable and dilated convolutions and
max pooling are listed by tracing the built network. Their stride-2 forms (`reduce`) are DARTS's, so
`cell:darts` builds the `darts` networks.
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


def _build_avg_pool(c: int, stride: int = 1):
    import torch.nn as nn

    return nn.AvgPool2d(3, stride=stride, padding=1, count_include_pad=False)


def _darts(name: str, stride: int):
    def build(c: int):
        from nasutil_search_spaces.darts_network import make_op

        return make_op(name, c, stride)

    return build


def _build_relu_conv_bn_strided(kernel: int):
    def build(c: int):
        from nasutil_search_spaces._blocks import ReLUConvBN

        return ReLUConvBN(c, c, kernel, 2, kernel // 2)

    return build


NONE = CellOp("none", _build_zero, lambda c, size: [_same("scale", c, size, "zero")], zero=True)
SKIP_CONNECT = CellOp("skip_connect", _build_identity, lambda c, size: [], reduce=_darts("skip_connect", 2))
NOR_CONV_1X1 = CellOp("nor_conv_1x1", _build_relu_conv_bn(1), lambda c, size: relu_conv_bn_ops(c, c, size, 1, 1),
                      has_params=True, reduce=_build_relu_conv_bn_strided(1))
NOR_CONV_3X3 = CellOp("nor_conv_3x3", _build_relu_conv_bn(3), lambda c, size: relu_conv_bn_ops(c, c, size, 3, 1),
                      has_params=True, reduce=_build_relu_conv_bn_strided(3))
AVG_POOL_3X3 = CellOp("avg_pool_3x3", _build_avg_pool,
                      lambda c, size: [_same("pool", c, size, "avg", kernel=3, stride=1)],
                      reduce=lambda c: _build_avg_pool(c, 2))
MAX_POOL_3X3 = CellOp("max_pool_3x3", _darts("max_pool_3x3", 1), None, reduce=_darts("max_pool_3x3", 2))
SEP_CONV_3X3 = CellOp("sep_conv_3x3", _darts("sep_conv_3x3", 1), None, has_params=True,
                      reduce=_darts("sep_conv_3x3", 2))
SEP_CONV_5X5 = CellOp("sep_conv_5x5", _darts("sep_conv_5x5", 1), None, has_params=True,
                      reduce=_darts("sep_conv_5x5", 2))
DIL_CONV_3X3 = CellOp("dil_conv_3x3", _darts("dil_conv_3x3", 1), None, has_params=True,
                      reduce=_darts("dil_conv_3x3", 2))
DIL_CONV_5X5 = CellOp("dil_conv_5x5", _darts("dil_conv_5x5", 1), None, has_params=True,
                      reduce=_darts("dil_conv_5x5", 2))
