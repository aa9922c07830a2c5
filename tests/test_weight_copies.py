"""A training step under autocast casts its layers' weights in one launch, and computes what autocast's own
casts compute: bit for bit on the CPU, with CPU autocast in bf16, and value for value on CUDA with deterministic
kernels (skipped without CUDA)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

from nasutil.colocate.training_step import TrainingStep, cosine_rates
from nasutil.colocate.weight_copies import WeightCopies
from nasutil.registry import get_space

ARCHS = ["|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
         "|nor_conv_1x1~0|+|none~0|none~1|+|none~0|nor_conv_3x3~1|nor_conv_1x1~2|"]


class OpCounts(TorchDispatchMode):
    """How many times each aten op ran inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def _network(arch: str) -> nn.Module:
    torch.manual_seed(0)
    space = get_space("nb201")
    return space.build(space.parse(arch), num_classes=10, input_size=8)


def _steps(model: nn.Module, copies: bool, steps: int = 4) -> TrainingStep:
    torch.manual_seed(1)
    x, y = torch.randn(64, 3, 8, 8), torch.randint(0, 10, (64,))
    unit = TrainingStep(model, lambda t: t, x, y, 16, cosine_rates(0.1, steps), 0.9, 5e-4, torch.bfloat16,
                        graph=False)
    assert unit.copies is not None and len(unit.copies) > 0
    if not copies:
        unit.copies = None  # autocast casts each weight itself, as before
    for step in range(steps):
        unit.run(step, torch.arange(16) + 16 * (step % 4))
    return unit


@pytest.mark.parametrize("arch", ARCHS)
def test_one_cast_launch_a_step_computes_what_autocasts_own_casts_compute(arch):
    ours, theirs = _network(arch), _network(arch)
    unit = _steps(ours, copies=True)
    reference = _steps(theirs, copies=False)
    mine, other = ours.state_dict(), theirs.state_dict()
    assert mine.keys() == other.keys()
    for name in mine:
        assert mine[name].dtype == other[name].dtype, name
        assert torch.equal(mine[name], other[name]), name
    for a, b in zip(unit.buffers, reference.buffers):  # the momentum too
        assert torch.equal(a, b)
    assert unit.take_loss(4) == reference.take_loss(4)
    # the network holds its fp32 weights again, and evaluates as the reference does
    assert all(p.dtype == torch.float32 for p in ours.parameters())
    x = torch.randn(8, 3, 8, 8)
    with torch.no_grad():
        assert torch.equal(ours.eval()(x), theirs.eval()(x))


def test_a_step_casts_the_weights_in_two_launches_instead_of_two_a_weight():
    counted = {}
    for copies in (True, False):
        model = _network(ARCHS[0])
        unit = _steps(model, copies=copies, steps=1)
        with OpCounts() as ops:
            unit.run(1, torch.arange(16))
        counted[copies] = ops.counts
    weights = len(WeightCopies(_network(ARCHS[0]), torch.bfloat16))
    assert weights >= 10
    # autocast casts each weight forward, and autograd each gradient back
    assert counted[False].get("aten._to_copy", 0) >= 2 * weights
    assert counted[True].get("aten._to_copy", 0) <= counted[False]["aten._to_copy"] - 2 * weights
    assert counted[True].get("aten._foreach_copy_", 0) == 2
    assert "aten._foreach_copy_" not in counted[False]


class StandardizedConv(nn.Conv2d):
    """A convolution that computes on its weight before it convolves: it must see the fp32 weight."""

    def forward(self, x):
        w = self.weight - self.weight.mean(dim=(1, 2, 3), keepdim=True)
        return self._conv_forward(x, w, self.bias)


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.standardized = StandardizedConv(4, 4, 3)
        self.head = nn.Linear(4, 4)
        self.scale = nn.Module()
        self.scale.weight = self.head.weight  # the head's weight, held by a module autocast does not cast for
        self.twice = nn.Linear(4, 4)
        self.branch = nn.Sequential(self.twice)  # one layer reached by two paths
        self.frozen = nn.Linear(4, 4).requires_grad_(False)

    def forward(self, x):
        h = self.standardized(self.conv(x)).mean(dim=(2, 3))
        return self.head(self.branch(self.twice(h))) * self.scale.weight.sum() + self.frozen(h)


def test_only_weights_that_autocast_casts_whole_get_a_copy():
    model = Tied()
    copies = WeightCopies(model, torch.bfloat16)
    held = {name for name, p in model.named_parameters() if copies.holds(p)}
    assert held == {"conv.weight", "conv.bias", "twice.weight", "twice.bias", "head.bias"}
    assert all(c.dtype == torch.bfloat16 for c in copies.copies)
    assert len(WeightCopies(model, torch.float32)) == 0  # nothing to cast


def test_the_weights_are_back_after_a_forward_that_fails():
    model = Tied()
    copies = WeightCopies(model, torch.bfloat16)
    before = dict(model.named_parameters())
    with pytest.raises(RuntimeError):
        with copies.swapped():
            assert model.conv.weight is not before["conv.weight"]
            model(torch.randn(1, 5, 8, 8))  # wrong channels
    assert dict(model.named_parameters()) == before
    assert model.twice.weight is before["twice.weight"]


def test_a_shared_layer_trains_its_weight_as_autocast_does():
    """A layer run twice in one forward accumulates its copy's gradient in bf16, as autocast accumulates the
    gradient of its one cached cast: the same update."""
    torch.manual_seed(0)
    ours = Tied()
    theirs = copy.deepcopy(ours)
    x, y = torch.randn(32, 3, 8, 8), torch.randint(0, 4, (32,))
    for model, copies in ((ours, True), (theirs, False)):
        unit = TrainingStep(model, lambda t: t, x, y, 16, cosine_rates(0.1, 2), 0.9, 0.0, torch.bfloat16,
                            graph=False)
        if not copies:
            unit.copies = None
        for step in range(2):
            unit.run(step, torch.arange(16) + 16 * step)
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        assert torch.equal(a, b), name


def _cuda_steps(copies: bool, graph: bool, steps: int = 6) -> tuple[nn.Module, TrainingStep]:
    model = _network(ARCHS[0]).cuda().to(memory_format=torch.channels_last)
    torch.manual_seed(1)
    x, y = torch.randn(128, 3, 8, 8, device="cuda"), torch.randint(0, 10, (128,), device="cuda")
    unit = TrainingStep(model, lambda t: t.contiguous(memory_format=torch.channels_last), x, y, 32,
                        cosine_rates(0.1, steps), 0.9, 5e-4, torch.bfloat16, graph=graph)
    if not copies:
        unit.copies = None
    for _ in range(steps):
        unit.advance()
    torch.cuda.synchronize()
    return model, unit


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda_a_captured_step_with_one_cast_launch_trains_what_autocast_trains_eagerly(monkeypatch):
    """Deterministic kernels: the captured step with the copies ends where the eager autocast step ends, value
    for value, and an eager step launches fewer kernels with them (two fewer a weight, two more a step)."""
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", True)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)
    ours, unit = _cuda_steps(copies=True, graph=True)
    theirs, reference = _cuda_steps(copies=False, graph=False)
    mine, other = ours.state_dict(), theirs.state_dict()
    for name in mine:
        difference = (mine[name].float() - other[name].float()).abs().max().item()
        assert torch.equal(mine[name], other[name]), (name, difference)
    assert unit.take_loss(6) == reference.take_loss(6)

    def kernels(copies: bool) -> int:
        _, step = _cuda_steps(copies=copies, graph=False, steps=2)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            step.advance()
            torch.cuda.synchronize()
        return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)

    weights = len(unit.copies)
    assert kernels(True) <= kernels(False) - 2 * weights + 4
