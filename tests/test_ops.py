"""Operator lists: the spaces' direct listings equal tracing the built network, and FLOPs agree."""

from collections import Counter

import pytest
import torch.nn as nn

from nasutil import get_space
from nasutil.counting import count_model
from nasutil.op_tracing import trace_ops
from nasutil.ops import Op, network_flops, network_params


# odd sizes: a reduction block halves 30 to 15 and 15 to 8 (a 28x28 input reaches 7), where its two paths once
# disagreed by one and the network failed
@pytest.mark.parametrize("space_name,sizes,count", [("nb201", (32, 16, 30, 28, 7), 8), ("cell:nb201", (30, 7), 3),
                                                    ("mbconv", (224, 32), 4)])
def test_direct_listing_equals_the_traced_network(space_name, sizes, count):
    space = get_space(space_name)
    for arch in space.sample_many(count, seed=3):
        for size in sizes:
            model = space.build(arch, num_classes=7, input_size=size)
            listed = space.operators(arch, num_classes=7, input_size=size)
            assert Counter(listed) == Counter(trace_ops(model, size, space.in_channels)), arch.to_string()
            counts = count_model(model, size, space.in_channels, per_layer=False)
            assert network_flops(listed) == counts.flops_per_image
            assert network_params(listed) == counts.params


def test_trace_sees_element_wise_ops_between_modules():
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3, padding=1)
            self.gate = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 8, 1), nn.Sigmoid())

        def forward(self, x):
            y = self.conv(x)
            return x + y * self.gate(y)

    ops = trace_ops(nn.Sequential(nn.Conv2d(3, 8, 1), Residual()), 10)
    families = Counter(op.family for op in ops)
    assert families == Counter({"conv": 3, "gpool": 1, "act": 1, "mul": 1, "add": 1})
    mul = next(op for op in ops if op.family == "mul")
    assert mul.variant == "broadcast" and (mul.c_out, mul.h_out) == (8, 10)


def test_generic_space_default_traces_the_built_network():
    space = get_space("darts")
    arch = space.sample_many(1, seed=0)[0]
    ops = space.operators(arch, input_size=32)
    assert network_flops(ops) == count_model(space.build(arch, input_size=32), 32, per_layer=False).flops_per_image
    assert any(op.family == "dwconv" for op in ops)


def test_op_round_trips_and_counts():
    op = Op("dwconv", 32, 28, 28, 32, 14, 14, kernel=5, stride=2, groups=32)
    assert Op.from_dict(op.to_dict()) == op and hash(Op.from_dict(op.to_dict())) == hash(op)
    assert op.flops == 2 * 32 * 14 * 14 * 25 and op.params == 32 * 25
    assert op.bytes(4, 2) == ((32 * 28 * 28 + 32 * 14 * 14) * 4 + 32 * 25) * 2
    add = Op("add", 16, 8, 8, 16, 8, 8)
    assert add.input_elems == 2 * 16 * 64 and add.flops == 0


def test_dilation_is_part_of_an_op():
    """A dilated convolution does the work of a plain one but runs another, slower kernel: the op keeps
    its dilation, so an operator table times it apart (DARTS's dil_conv edges)."""
    plain = Op("dwconv", 16, 32, 32, 16, 32, 32, kernel=5, groups=16)
    dilated = Op("dwconv", 16, 32, 32, 16, 32, 32, kernel=5, groups=16, dilation=2)
    assert plain != dilated and plain.flops == dilated.flops and dilated.reach == 9
    assert "dilation" not in plain.to_dict() and Op.from_dict(dilated.to_dict()) == dilated
    net = nn.Sequential(nn.Conv2d(3, 8, 5, padding=4, dilation=2, groups=1), nn.Conv2d(8, 8, 3, padding=1))
    traced = [op for op in trace_ops(net, 16) if op.family == "conv"]
    assert [op.dilation for op in traced] == [2, 1]


def test_a_dilated_op_is_timed_with_its_dilation():
    import torch

    from nasutil.predictor.op_tables import op_kind
    from nasutil.predictor.op_timing import op_callable

    op = Op("dwconv", 8, 16, 16, 8, 8, 8, kernel=5, stride=2, groups=8, dilation=2)
    fn = op_callable(op, 2, torch.device("cpu"), torch.float32, channels_last=False)
    assert tuple(fn().shape) == (2, 8, 8, 8)
    assert op_kind(op) == "dwconv 5x5/2 dilation 2" and op_kind(Op("dwconv", 8, 16, 16, 8, 8, 8, 5, 2, 8)) == "dwconv 5x5/2"


@pytest.mark.parametrize("input_size, in_channels", [(-3, 3), (0, 3), (2.5, 3), (True, 3), ("32", 3), (32, 0)])
def test_count_model_refuses_a_size_no_network_takes_in_one_line(input_size, in_channels):
    from nasutil.errors import NasutilError

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
    with pytest.raises(NasutilError, match="must be a whole number of at least 1"):
        count_model(model, input_size, in_channels)


def test_count_model_takes_a_numpy_integer():
    import numpy as np

    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())
    assert count_model(model, np.int64(8)).flops_per_image == count_model(model, 8).flops_per_image
