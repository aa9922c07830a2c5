"""Operator lists: the spaces' direct listings equal tracing the built network, and FLOPs agree."""

from collections import Counter

import pytest
import torch.nn as nn

from nasutil import get_space
from nasutil.counting import count_model
from nasutil.op_tracing import trace_ops
from nasutil.ops import Op, network_flops, network_params


@pytest.mark.parametrize("space_name,sizes,count", [("nb201", (32, 16), 8), ("mbconv", (224, 32), 4)])
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
