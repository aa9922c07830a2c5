"""A network built without storage and given its weights on the measured device is the built network in all a
timing sees: every tensor's shape, strides, dtype and device; values of the scale a built network has; each
view aligned and apart from the others. CPU stands in for the device here (`allocate` takes any device)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn

from nasutil.errors import NasutilError
from nasutil.evaluator import MeasureConfig
from nasutil.evaluator.candidate import Candidate, build
from nasutil.evaluator.run_model import measure_model
from nasutil.evaluator.weights import ALIGN_BYTES, allocate, built_without_storage, materialize, without_storage

NB201 = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|skip_connect~0|avg_pool_3x3~1|nor_conv_3x3~2|"


def _mbconv_arch() -> str:
    from nasutil.registry import get_space

    import numpy as np

    return get_space("mbconv").sample(np.random.default_rng(5)).to_string()


def _pair(space: str, arch: str, channels_last: bool = True) -> tuple[nn.Module, nn.Module]:
    """The network built on the host and built without storage, both cast as a measurement casts them."""
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    host = build(Candidate(space, arch), None, 10).model.eval().to(dtype=torch.float16, memory_format=fmt)
    bare = build(Candidate(space, arch), None, 10, without_storage=True).model.eval()
    assert built_without_storage(bare)
    return host, bare.to(dtype=torch.float16, memory_format=fmt)


@pytest.mark.parametrize("space,channels_last", [("nb201", True), ("nb201", False), ("mbconv", True)])
def test_every_tensor_has_the_built_networks_shape_strides_and_dtype(space, channels_last):
    arch = NB201 if space == "nb201" else _mbconv_arch()
    host, bare = _pair(space, arch, channels_last)
    made = materialize(bare, "cpu")
    assert not built_without_storage(made)
    theirs, ours = host.state_dict(), made.state_dict()
    assert list(theirs) == list(ours)
    for name, t in theirs.items():
        mine = ours[name]
        assert (mine.shape, mine.stride(), mine.dtype, mine.device) == (t.shape, t.stride(), t.dtype, t.device), name
    assert all(type(p) is nn.Parameter for p in made.parameters())


def test_values_have_the_scale_a_built_network_has():
    torch.manual_seed(0)
    host, bare = _pair("nb201", NB201)
    made = materialize(bare, "cpu")
    for (name, p), (_, q) in zip(made.named_parameters(), host.named_parameters()):
        if p.dim() >= 2:  # a convolution's or linear layer's weight: PyTorch's default uniform bound
            bound = 1 / math.sqrt(p.shape[1] * math.prod(p.shape[2:]))
            assert p.abs().max().item() <= bound * 1.001, name
            if p.numel() >= 500:
                assert p.float().std().item() == pytest.approx(q.float().std().item(), rel=0.15), name
    for module in made.modules():
        if isinstance(module, nn.BatchNorm2d):
            assert torch.equal(module.running_var, torch.ones_like(module.running_var))
            assert torch.equal(module.running_mean, torch.zeros_like(module.running_mean))
            if module.weight is not None:
                assert torch.equal(module.weight, torch.ones_like(module.weight))
    x = torch.randn(4, 3, 32, 32)
    with torch.inference_mode():
        out, ref = made.float()(x), host.float()(x)
    assert torch.isfinite(out).all()
    # two draws of a random network's outputs differ in spread by up to about 3x: the same order of magnitude
    assert 0.1 < out.std().item() / ref.std().item() < 10


def test_views_are_aligned_and_apart():
    _, bare = _pair("nb201", NB201)
    materialize(bare, "cpu")
    tensors = [*bare.parameters(), *bare.buffers()]
    base = {t.dtype: min(u.data_ptr() for u in tensors if u.dtype == t.dtype) for t in tensors}
    spans = []
    for t in tensors:  # the block's start is the allocator's (a CUDA block starts on 512 bytes)
        assert (t.data_ptr() - base[t.dtype]) % ALIGN_BYTES == 0
        extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) if t.numel() else 0
        spans.append((t.data_ptr(), t.data_ptr() + extent * t.element_size()))
    spans.sort()
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))


def test_allocation_gives_memory_and_the_fill_gives_values():
    """The turn on the device holds only the fill: allocating already leaves no tensor on the meta device."""
    _, bare = _pair("nb201", NB201)
    fill = allocate(bare, "cpu")
    assert not built_without_storage(bare)
    for t in bare.buffers():
        t.fill_(7)
    fill()
    assert all(not (t == 7).all() for name, t in bare.named_buffers() if name.endswith("running_var"))


def test_memory_the_cache_cannot_serve_is_taken_inside_the_turn():
    """With `in_turn` (the default where the caching allocator would have to map memory from the driver), the
    tensors stay storage-less until the fill, which then gives them the built network's layout and values."""
    host, bare = _pair("nb201", NB201)
    fill = allocate(bare, "cpu", in_turn=True)
    assert built_without_storage(bare)
    fill()
    assert not built_without_storage(bare)
    theirs, ours = host.state_dict(), bare.state_dict()
    assert list(theirs) == list(ours)
    for name, t in theirs.items():
        assert (ours[name].shape, ours[name].stride(), ours[name].dtype) == (t.shape, t.stride(), t.dtype), name
    assert all(ours[name].eq(1).all() for name in ours if name.endswith("running_var"))


def test_a_space_without_an_op_listing_is_built_with_storage():
    from nasutil.registry import get_space

    import numpy as np

    arch = get_space("nb101").sample(np.random.default_rng(0)).to_string()
    built = build(Candidate("nb101", arch), None, 10, without_storage=True)
    assert not built_without_storage(built.model)


@pytest.mark.parametrize("counted", [True, False])
def test_a_network_built_without_storage_is_measured(counted):
    """On the CPU (eager) as a stand-in: with the op listing's counts the weights are given as on a device; without
    them the network is first given host memory, since counting runs it."""
    built = build(Candidate("nb201", NB201), 16, 10, without_storage=True)
    config = MeasureConfig(device="cpu", batch_size=2, mode="eager", counters=False, repeats=2, warmup=1,
                           min_window_ms=0.1, weights="device")
    m = measure_model(built.model, config, space="nb201", arch=built.arch, input_size=16,
                      counts=built.counts if counted else None)
    assert m.ok and m.latency_ms > 0
    assert m.flops_per_image == built.counts.flops_per_image
    assert ("allocate_s" in m.timing) is counted


def test_weights_must_be_host_or_device():
    with pytest.raises(NasutilError, match="weights must be one of host, device"):
        MeasureConfig(device="cpu", weights="disk")
    plain = MeasureConfig(device="cpu")
    assert plain.weights == plain.fast().with_(weights="host").weights == "host"
    assert plain.fast().weights == "device"
