"""A network moved in one packed copy is the network `Module.to` gives: the same parameter objects, values,
shapes, memory formats and gradients' flags, and it trains to the same weights; a network whose tensors
share storage is moved by `Module.to`, so that what was shared stays shared."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from nasutil.colocate.transfer import move_to_device
from nasutil.registry import get_space

CELL = "|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|+|avg_pool_3x3~0|skip_connect~1|nor_conv_3x3~2|"


def _network() -> nn.Module:
    torch.manual_seed(0)
    space = get_space("nb201")
    return space.build(space.parse(CELL), num_classes=10, input_size=28)


def _tensors(model: nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [*model.named_parameters(), *model.named_buffers()]


def _train(model: nn.Module, steps: int = 3) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(8, 3, 28, 28, generator=generator).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (8,), generator=generator)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


@pytest.mark.parametrize("channels_last", [True, False])
def test_a_packed_move_gives_what_module_to_gives(channels_last):
    model = _network()
    expected = copy.deepcopy(model).to(memory_format=torch.channels_last) if channels_last else copy.deepcopy(model)
    parameters = [id(p) for p in model.parameters()]
    before = [t.detach() for _, t in _tensors(model)]  # held: a freed storage's address could be reused
    storages = {t.untyped_storage().data_ptr() for t in before}
    assert move_to_device(model, torch.device("cpu"), channels_last=channels_last, packed=True) is model
    assert [id(p) for p in model.parameters()] == parameters  # an optimizer made before still holds them
    moved = {t.untyped_storage().data_ptr() for _, t in _tensors(model)}
    assert len(moved) <= 2 and not moved & storages  # one buffer per dtype (floats, BatchNorm's step counts)
    assert sum(t.dim() == 4 for _, t in _tensors(model)) > 10
    for (name, got), (_, want) in zip(_tensors(model), _tensors(expected), strict=True):
        assert (got.shape, got.stride(), got.dtype, got.requires_grad) == \
               (want.shape, want.stride(), want.dtype, want.requires_grad), name
        assert torch.equal(got, want), name
    _train(model)
    _train(expected)
    for (name, got), (_, want) in zip(_tensors(model), _tensors(expected), strict=True):
        assert torch.equal(got, want), name  # trained in place through the views, bit for bit


def test_tied_weights_stay_tied():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight  # one parameter in two modules: packed once
    model.register_buffer("first_row", model[0].weight.data[0])  # another tensor over the same storage
    move_to_device(model, torch.device("cpu"), packed=True)
    assert model[1].weight is model[0].weight
    with torch.no_grad():
        model[0].weight.add_(1.0)
    assert torch.equal(model[1].weight, model[0].weight)
    assert torch.equal(model.first_row, model[0].weight[0])  # still a view of the weight


def test_a_network_with_a_gradient_is_moved_with_it():
    model = nn.Linear(3, 2)
    model(torch.randn(4, 3)).sum().backward()
    grad = model.weight.grad.clone()
    move_to_device(model, torch.device("cpu"), packed=True)
    assert torch.equal(model.weight.grad, grad)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_packed_move_to_the_gpu_gives_what_module_to_gives():
    model = _network()
    expected = copy.deepcopy(model).to("cuda").to(memory_format=torch.channels_last)
    move_to_device(model, torch.device("cuda"), channels_last=True)
    assert {t.untyped_storage().data_ptr() for _, t in _tensors(model)} != \
           {t.untyped_storage().data_ptr() for _, t in _tensors(expected)}
    for (name, got), (_, want) in zip(_tensors(model), _tensors(expected), strict=True):
        assert (got.device, got.shape, got.stride(), got.dtype) == (want.device, want.shape, want.stride(),
                                                                    want.dtype), name
        assert torch.equal(got, want), name
    storages = {t.untyped_storage().data_ptr() for _, t in _tensors(model)}
    assert len(storages) <= 2  # packed: one buffer per dtype
