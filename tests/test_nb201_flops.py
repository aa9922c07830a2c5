"""nasutil's NAS-Bench-201 network against NNI's hub NasBench201 for the same cell: FLOPs and parameters agree."""

import numpy as np
import pytest

from nasutil import get_space
from nasutil.counting import count_model
from nasutil_search_spaces.nb201 import EDGES, OPS, NB201Arch

#: nasutil op name -> NNI's name for it (NNI drops the "nor_" prefix of the convolutions)
NNI_OP = {"none": "none", "skip_connect": "skip_connect", "nor_conv_1x1": "conv_1x1",
          "nor_conv_3x3": "conv_3x3", "avg_pool_3x3": "avg_pool_3x3"}


def nb201_sample_for_nni(arch: NB201Arch) -> dict[str, str]:
    """The NNI sample for a cell: NNI labels the edge from node j to node i `cell/{j}_{i}`."""
    return {f"cell/{frm}_{to}": NNI_OP[op] for (to, frm), op in zip(EDGES, arch.ops)}


def _cells() -> list[NB201Arch]:
    uniform = [NB201Arch((op,) * len(EDGES)) for op in OPS]
    rng = np.random.default_rng(201)
    return uniform + [get_space("nb201").sample(rng) for _ in range(5)]


@pytest.fixture(scope="module")
def spaces():
    return get_space("nb201"), get_space("nni")


def test_edge_labels_match_nni(spaces):
    _, nni_space = spaces
    assert set(nb201_sample_for_nni(NB201Arch(("none",) * 6))) == set(nni_space.schema.labels)


@pytest.mark.parametrize("arch", _cells(), ids=str)
def test_flops_and_params_match_nni(spaces, arch):
    ours_space, nni_space = spaces
    ours = count_model(ours_space.build(arch), 32, per_layer=False)
    theirs = count_model(nni_space.build(nni_space.arch_from_sample(nb201_sample_for_nni(arch))), 32,
                         per_layer=False)
    assert ours.flops_per_image == pytest.approx(theirs.flops_per_image, rel=0.01)
    assert ours.params == pytest.approx(theirs.params, rel=0.01)
    # the two are the same network, so the counts are in fact identical
    assert (ours.flops_per_image, ours.params) == (theirs.flops_per_image, theirs.params)


def _conv_inputs_channels_last(model, size: int = 32) -> list[bool]:
    """For each convolution a forward pass runs: was its input in channels_last memory format?"""
    import torch

    model = model.eval().to(memory_format=torch.channels_last)
    seen: list[bool] = []

    def note(module, args) -> None:
        x = args[0]
        seen.append(x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous())

    hooks = [m.register_forward_pre_hook(note) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        model(torch.randn(2, 3, size, size).contiguous(memory_format=torch.channels_last))
    for h in hooks:
        h.remove()
    return seen


@pytest.mark.parametrize("arch", _cells()[5:], ids=str)
def test_nb201_network_keeps_channels_last_through_every_conv(spaces, arch):
    """nasutil's network sums node inputs in place, so every conv sees channels_last input; NNI's sums them
    with torch.stack + sum, which hands most convs an NCHW copy (the FLOP count cannot see this)."""
    ours_space, nni_space = spaces
    ours = _conv_inputs_channels_last(ours_space.build(arch))
    assert ours and all(ours)
    theirs = _conv_inputs_channels_last(nni_space.build(nni_space.arch_from_sample(nb201_sample_for_nni(arch))))
    assert len(theirs) == len(ours) and not all(theirs)
