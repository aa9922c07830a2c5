"""The MBConv macro space: strings, encodings, Optuna, and the networks it builds."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
import torch
import torch.nn as nn

from nasutil.counting import count_model, count_params, layer_kind
from nasutil.errors import InvalidArchError, NotEnumerableError
from nasutil.registry import get_space
from nasutil_search_spaces.mbconv import (
    BASE_CHANNELS, NUM_STAGES, InvertedResidual, MBConvArch, MBConvSpace, SqueezeExcite, StageConfig,
    resolution_plan,
)

NARROW = "-".join(["k3e1d1w0.5se0"] * NUM_STAGES)
MOBILENET_V2 = "k3e1d1w1.0se0-k3e6d2w1.0se0-k3e6d3w1.0se0-k3e6d4w1.0se0-k3e6d3w1.0se0-k3e6d3w1.0se0-k3e6d1w1.0se0"


@pytest.fixture(scope="module")
def space() -> MBConvSpace:
    return get_space("mbconv")


def _with_stage(arch: MBConvArch, index: int, **changes) -> MBConvArch:
    stages = list(arch.stages)
    old = stages[index]
    stages[index] = StageConfig(**{**old.__dict__, **changes})
    return MBConvArch(tuple(stages))


def test_registry_gives_this_space(space):
    assert isinstance(space, MBConvSpace)
    assert space.name == "mbconv"


def test_sampled_archs_build_run_and_round_trip(space):
    archs = space.sample_many(50, seed=0)
    assert len({a.to_string() for a in archs}) > 45
    torch.manual_seed(0)
    x = torch.zeros(2, 3, 32, 32)
    for arch in archs:
        text = arch.to_string()
        assert space.parse(text) == arch
        assert space.parse(text).to_string() == text
        model = space.build(arch, num_classes=10, input_size=32)
        with torch.no_grad():
            out = model(x)
        assert out.shape == (2, 10)
        assert torch.isfinite(out).all()


def test_forward_at_224_and_default_input_size(space):
    arch = space.parse(NARROW)
    model = space.build(arch, num_classes=7, input_size=224).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 224, 224)).shape == (1, 7)
        assert model.features(torch.randn(1, 3, 224, 224)).shape[-2:] == (7, 7)
    assert space.default_input_size == 224


def test_small_input_keeps_resolution(space):
    model = space.build(space.parse(NARROW), input_size=32).eval()
    with torch.no_grad():
        assert model.features(torch.zeros(1, 3, 32, 32)).shape[-2:] == (8, 8)
    assert resolution_plan(32) == (1, (1, 1, 1, 2, 1, 2, 1))
    assert resolution_plan(64) == (1, (1, 1, 1, 2, 1, 2, 1))
    assert resolution_plan(224) == (2, (1, 2, 2, 2, 1, 2, 1))


def test_mobilenet_v2_matches_published_size(space):
    """MobileNetV2 1.0 with a 1000-way classifier has about 3.5M parameters."""
    model = space.build(space.parse(MOBILENET_V2), num_classes=1000, input_size=224)
    assert 3.4e6 < count_params(model) < 3.6e6


def test_depthwise_convs_are_depthwise_and_blocks_follow_arch(space):
    arch = space.sample(np.random.default_rng(3))
    model = space.build(arch, input_size=32)
    blocks = [m for m in model.modules() if isinstance(m, InvertedResidual)]
    assert len(blocks) == sum(s.depth for s in arch.stages)
    for stage_index, (stage, stage_module) in enumerate(zip(arch.stages, model.stages)):
        assert len(stage_module) == stage.depth
        for block in stage_module:
            conv = block.depthwise[0]
            assert conv.groups == conv.in_channels == conv.out_channels
            assert conv.kernel_size == (stage.kernel, stage.kernel)
            assert layer_kind(conv) == f"dwconv{stage.kernel}x{stage.kernel}"
            assert isinstance(block.se, SqueezeExcite) == stage.se
            assert isinstance(block.expand, nn.Identity) == (stage.expansion == 1)
            act = nn.ReLU6 if stage_index < 3 else nn.Hardswish
            assert isinstance(block.depthwise[2], act)
        assert stage_module[-1].project[0].out_channels >= BASE_CHANNELS[stage_index] // 2


def test_residual_only_on_stride_one_equal_channels(space):
    model = space.build(space.parse(MOBILENET_V2), input_size=224)
    for stage_module in model.stages:
        for block in stage_module:
            dw = block.depthwise[0]
            c_in = dw.in_channels if isinstance(block.expand, nn.Identity) else block.expand[0].in_channels
            expected = dw.stride == (1, 1) and c_in == block.project[0].out_channels
            assert block.use_residual == expected
        # every first block changes channels here (32->16, 16->24, ...); all later ones keep them
        assert not stage_module[0].use_residual
        assert all(b.use_residual for b in list(stage_module)[1:])


def test_width_se_expansion_and_depth_grow_the_network(space):
    base = space.parse(MOBILENET_V2)

    def params(arch: MBConvArch) -> int:
        return count_params(space.build(arch, input_size=32))

    p0 = params(base)
    assert params(_with_stage(base, 3, width=0.5)) < p0 < params(_with_stage(base, 3, width=1.5))
    assert params(_with_stage(base, 4, se=True)) > p0
    assert params(_with_stage(base, 2, expansion=3)) < p0
    assert params(_with_stage(base, 5, depth=4)) > p0
    # the head widens with the last stage only above width 1
    head = lambda a: space.build(a, input_size=32).head[0].out_channels  # noqa: E731
    assert head(_with_stage(base, 6, width=0.5)) == head(base) == 1280
    assert head(_with_stage(base, 6, width=1.5)) == 1920


def test_space_spans_narrow_to_wide(space):
    narrow = space.parse(NARROW)
    wide = MBConvArch.uniform(kernel=7, expansion=6, depth=4, width=1.5, se=True)
    f_narrow = count_model(space.build(narrow, input_size=32), 32, per_layer=False).flops_per_image
    f_wide = count_model(space.build(wide, input_size=32), 32, per_layer=False).flops_per_image
    assert f_wide > 50 * f_narrow


def test_encoding_fixed_length_and_range(space):
    archs = space.sample_many(30, seed=1) + [space.parse(NARROW), MBConvArch.uniform(7, 6, 4, 1.5, True)]
    encs = [a.encode() for a in archs]
    assert all(e.dtype == np.float32 and e.shape == (space.encoding_size,) for e in encs)
    stacked = np.stack(encs)
    assert stacked.min() == 0.0 and stacked.max() == 1.0
    assert len({e.tobytes() for e in encs}) == len({a.to_string() for a in archs})


def test_size_is_product_of_choices(space):
    first = 3 * 1 * 4 * 5 * 2
    other = 3 * 4 * 4 * 5 * 2
    assert space.size() == first * other ** 6
    with pytest.raises(NotEnumerableError):
        next(iter(space.enumerate()))


def test_suggest_with_real_study(space):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(5):
        trial = study.ask()
        arch = space.suggest(trial)
        assert isinstance(arch, MBConvArch)
        assert space.parse(arch.to_string()) == arch
        assert "stage1_expansion" not in trial.params
        assert {"stage2_expansion", "stage7_kernel", "stage3_width", "stage5_se", "stage4_depth"} <= set(trial.params)
        study.tell(trial, 0.0)
        seen.add(arch.to_string())
    assert len(seen) > 1


def test_parse_is_deterministic_and_lenient_on_number_spelling(space):
    a, b = space.parse(MOBILENET_V2), space.parse(MOBILENET_V2)
    assert a == b and hash(a) == hash(b) and a.canonical_hash() == b.canonical_hash()
    assert space.parse("  " + MOBILENET_V2.replace("w1.0", "w1") + "\n") == a


@pytest.mark.parametrize("text, needle", [
    ("", "empty"),
    ("   ", "empty"),
    (None, "string"),
    ("-".join(["k3e1d1w1.0se0"] * 6), "7 stage tokens"),
    ("-".join(["k3e1d1w1.0se0"] * 8), "7 stage tokens"),
    (MOBILENET_V2 + "-", "7 stage tokens"),
    (MOBILENET_V2.replace("-", "_"), "7 stage tokens"),
    (MOBILENET_V2.replace("k3e6d2", "k4e6d2"), "stage 2: unknown kernel size 4"),
    (MOBILENET_V2.replace("k3e6d4", "k3e5d4"), "stage 4: unknown expansion ratio 5"),
    (MOBILENET_V2.replace("k3e1d1", "k3e6d1"), "stage 1: unknown expansion ratio 6"),
    (MOBILENET_V2.replace("k3e6d1", "k3e6d5"), "stage 7: unknown depth 5"),
    (MOBILENET_V2.replace("k3e6d1", "k3e6d0"), "stage 7: unknown depth 0"),
    (MOBILENET_V2.replace("k3e6d2w1.0", "k3e6d2w0.6"), "stage 2: unknown width multiplier 0.6"),
    (MOBILENET_V2.replace("d2w1.0se0", "d2w1.0se2"), "stage 2: unknown se flag 2"),
    (MOBILENET_V2.replace("d2w1.0se0", "d2w1.0"), "stage 2: malformed"),
    (MOBILENET_V2.replace("k3e6d2", "K3E6D2"), "stage 2: malformed"),
    (MOBILENET_V2.replace("k3e6d2w1.0", "k3e6d2w1.0.0"), "stage 2: malformed"),
    (MOBILENET_V2.replace("k3e6d2", "k3 e6d2"), "stage 2: malformed"),
    (MOBILENET_V2.replace("k3e6d2", "e6k3d2"), "stage 2: malformed"),
    (MOBILENET_V2.replace("k3e6d4w1.0se0", "k3e6d4w1.0se0\nx"), "stage 4: malformed"),
    ("garbage", "7 stage tokens"),
])
def test_bad_strings_raise_one_line_errors(space, text, needle):
    with pytest.raises(InvalidArchError) as info:
        space.parse(text)
    message = str(info.value)
    assert needle in message
    assert "\n" not in message and message


def test_invalid_arch_objects_are_rejected():
    good = StageConfig(3, 6, 2, 1.0, False)
    with pytest.raises(InvalidArchError, match="7 stages"):
        MBConvArch((good,) * 6)
    with pytest.raises(InvalidArchError, match="stage 1: unknown expansion"):
        MBConvArch((good,) * 7)
    arch = MBConvArch.uniform(width=1, se=1)
    assert arch.stages[0].width == 1.0 and isinstance(arch.stages[0].width, float) and arch.stages[0].se is True
    assert "w1.0se1" in arch.to_string()
