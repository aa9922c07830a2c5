"""The NNI adapter: hub spaces, user ModelSpaces, arch strings, and keeping nni out of everything else."""

import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import optuna
import pytest
import torch

from nasutil import InvalidArchError, NasutilError, get_space
from nasutil.errors import NotEnumerableError
from nasutil_search_spaces.nni_adapter import NNIModelSpace

ALL_CONV3 = {f"cell/{j}_{i}": "conv_3x3" for i in range(1, 4) for j in range(i)}


@pytest.fixture(scope="module")
def space():
    return get_space("nni")


@pytest.fixture(scope="module")
def user_space(tmp_path_factory):
    """A user's own ModelSpace in an importable module: a LayerChoice, ensure_frozen ints, a constraint,
    a choice of non-JSON values (tuples) and a `num_classes` argument."""
    folder = tmp_path_factory.mktemp("user_space")
    (folder / "tiny_nni_space.py").write_text(textwrap.dedent('''
        import nni
        import torch.nn as nn
        from nni.mutable import ExpressionConstraint, ensure_frozen
        from nni.nas.nn.pytorch import LayerChoice, ModelSpace

        class TinySpace(ModelSpace):
            def __init__(self, num_classes=10):
                super().__init__()
                width, depth = nni.choice("width", [4, 8]), nni.choice("depth", [1, 2, 3])
                pool = nni.choice("pool", [(1, 1), (2, 2)])
                for m in (width, depth, pool, ExpressionConstraint(width * depth <= 16, label="budget")):
                    self.add_mutable(m)
                w, d = ensure_frozen(width), ensure_frozen(depth)
                self.stem = LayerChoice({"k3": nn.Conv2d(3, w, 3, padding=1),
                                         "k5": nn.Conv2d(3, w, 5, padding=2)}, label="stem")
                self.body = nn.Sequential(*[nn.Conv2d(w, w, 3, padding=1) for _ in range(d)])
                p = ensure_frozen(pool)
                self.pool = nn.AdaptiveAvgPool2d(p)
                self.fc = nn.Linear(w * p[0] * p[1], num_classes)

            def forward(self, x):
                return self.fc(self.pool(self.body(self.stem(x))).flatten(1))

        class WithNumerical(ModelSpace):
            def __init__(self):
                super().__init__()
                self.add_mutable(nni.uniform("dropout", 0.0, 0.5))
                self.fc = nn.Linear(3, 10)
    '''))
    sys.path.insert(0, str(folder))
    try:
        yield get_space("nni:tiny_nni_space:TinySpace")
    finally:
        sys.path.remove(str(folder))


def test_nni_is_imported_only_by_the_nni_space():
    code = ("import sys, nasutil, nasutil.registry\n"
            "nasutil.registry.get_space('nb201')\n"
            "nasutil.registry.space_class('nni')\n"  # the adapter module itself imports nni lazily
            "assert 'nni' not in sys.modules, 'nni was imported'\n"
            "assert 'pytorch_lightning' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_default_is_the_nb201_hub_space(space):
    assert repr(space) == "NNIModelSpace(NasBench201)"
    assert space.size() == 5 ** 6
    assert space.encoding_size == 30
    assert space.default_input_size == 32


def test_sampled_archs_build_run_and_round_trip(space):
    rng = np.random.default_rng(0)
    archs = [space.sample(rng) for _ in range(50)]
    assert len({a.to_string() for a in archs}) > 40
    for arch in archs:
        text = arch.to_string()
        assert space.parse(text) == arch and str(arch) == text
        model = space.build(arch).eval()
        with torch.no_grad():
            assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_string_is_compact_sorted_json_of_the_sample(space):
    arch = space.parse(json.dumps(ALL_CONV3))
    assert arch.sample == ALL_CONV3
    assert arch.to_string() == json.dumps(ALL_CONV3, sort_keys=True, separators=(",", ":"))
    assert " " not in arch.to_string()


def test_parse_is_deterministic(space):
    text = json.dumps(ALL_CONV3)
    a, b = space.parse(text), space.parse(text)
    assert a == b and hash(a) == hash(b) and a.canonical_hash() == b.canonical_hash()
    assert pickle.loads(pickle.dumps(a)) == a


def test_encoding_is_one_hot_per_label(space):
    for arch in space.sample_many(10, seed=1):
        enc = arch.encode()
        assert enc.dtype == np.float32 and enc.shape == (space.encoding_size,)
        assert enc.reshape(6, 5).sum(axis=1).tolist() == [1.0] * 6


def test_enumerates_every_cell_once(space):
    archs = list(space.enumerate())
    assert len(archs) == space.size()
    assert len({a.canonical_hash() for a in archs}) == len(archs)
    assert archs[0].sample == {label: "none" for label in ALL_CONV3}


def test_build_gives_fresh_unshared_networks_with_num_classes(space):
    arch = space.parse(json.dumps(ALL_CONV3))
    a, b = space.build(arch, num_classes=7), space.build(arch, num_classes=7)
    assert a.training
    assert not {id(p) for p in a.parameters()} & {id(p) for p in b.parameters()}
    assert not {id(p) for p in a.parameters()} & {id(p) for p in space.model_space().parameters()}
    assert sum(p.numel() for p in a.parameters()) < sum(p.numel() for p in space.model_space().parameters())
    assert a.eval()(torch.zeros(1, 3, 32, 32)).shape == (1, 7)


def test_suggest_through_optuna(space):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trial = study.ask()
    arch = space.suggest(trial)
    assert len(trial.params) == 6
    assert trial.params == arch.sample
    assert space.parse(arch.to_string()) == arch


def test_model_space_identity_is_part_of_the_hash(space):
    small = NNIModelSpace("NasBench201", stem_out_channels=8)
    a, b = space.parse(json.dumps(ALL_CONV3)), small.parse(json.dumps(ALL_CONV3))
    assert a.to_string() == b.to_string()
    assert a != b and a.canonical_hash() != b.canonical_hash()
    with pytest.raises(InvalidArchError, match="stem_out_channels=8"):
        space.build(b)


def _with(**changes):
    return json.dumps({**ALL_CONV3, **changes})


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("   ", "empty"),
    ('{"cell/0_1": "conv_3x3"', "not valid JSON"),
    ("{'cell/0_1': 'conv_3x3'}", "not valid JSON"),
    ('["conv_3x3"]', "JSON object"),
    ('"conv_3x3"', "JSON object"),
    (_with(**{"cell/0_4": "conv_3x3"}), "unknown label 'cell/0_4'"),
    (_with(**{"cell/1_2": "conv_7x7"}), "'conv_7x7' is not a choice of label 'cell/1_2'"),
    (_with(**{"cell/1_2": 3}), "not a choice of label 'cell/1_2'"),
    (_with(**{"cell/1_2": None}), "not a choice of label 'cell/1_2'"),
    (json.dumps({k: v for k, v in ALL_CONV3.items() if k != "cell/2_3"}), "missing label 'cell/2_3'"),
    ("{}", "missing label"),
    ('{"cell/0_1":"none","cell/0_1":"none"}', "appears twice"),
])
def test_bad_strings_are_rejected_in_one_line(space, text, fragment):
    with pytest.raises(InvalidArchError) as info:
        space.parse(text)
    message = str(info.value)
    assert fragment in message
    assert "\n" not in message


@pytest.mark.parametrize("spec, fragment", [
    ("nni:NoSuchSpace", "ProxylessNAS"),
    ("nni:no_such_module_xyz:Space", "cannot import"),
    ("nni:json:JSONDecoder", "not an NNI ModelSpace"),
])
def test_unknown_nni_spaces_are_one_line_errors(spec, fragment):
    with pytest.raises(NasutilError) as info:
        get_space(spec)
    assert fragment in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["ProxylessNAS", "MobileNetV3Space"])
def test_imagenet_hub_spaces_build_and_run(name):
    space = get_space(f"nni:{name}")
    assert space.default_input_size == 224
    assert space.size() > 10 ** 12
    with pytest.raises(NotEnumerableError):
        next(space.enumerate())
    rng = np.random.default_rng(0)
    for _ in range(3):
        arch = space.sample(rng)
        assert space.parse(arch.to_string()) == arch
        assert arch.encode().shape == (space.encoding_size,)
        model = space.build(arch).eval()
        with torch.no_grad():  # both end in global pooling, so a CIFAR-sized input runs them cheaply
            assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 10)


def test_user_model_space_from_module_path(user_space):
    assert repr(user_space) == "NNIModelSpace(tiny_nni_space:TinySpace)"
    assert set(user_space.schema.labels) == {"width", "depth", "pool", "stem"}
    archs = list(user_space.enumerate())
    # the constraint width * depth <= 16 drops width 8 with depth 3
    assert len(archs) == user_space.size() == 2 * 2 * (3 + 2)
    assert all(a.sample["width"] * a.sample["depth"] <= 16 for a in archs)
    for arch in archs[:4] + archs[-2:]:
        assert user_space.parse(arch.to_string()) == arch
        model = user_space.build(arch, num_classes=3).eval()
        with torch.no_grad():
            assert model(torch.zeros(2, 3, 8, 8)).shape == (2, 3)
        assert model.body[0].in_channels == arch.sample["width"]


def test_user_space_constraints_and_index_valued_choices(user_space):
    arch = user_space.parse('{"depth":2,"pool":1,"stem":"k5","width":8}')
    assert arch.sample["pool"] == (2, 2)  # tuples are not JSON: written as their index
    assert user_space.build(arch).pool.output_size == (2, 2)
    with pytest.raises(InvalidArchError, match="budget"):
        user_space.parse('{"depth":3,"pool":0,"stem":"k5","width":8}')
    with pytest.raises(InvalidArchError, match="index 0..1"):
        user_space.parse('{"depth":2,"pool":[2,2],"stem":"k5","width":8}')
    rng = np.random.default_rng(0)
    assert all(a.sample["width"] * a.sample["depth"] <= 16 for a in (user_space.sample(rng) for _ in range(50)))


def test_user_space_suggest_prunes_what_breaks_a_constraint(user_space):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    outcomes = set()
    for _ in range(40):
        trial = study.ask()
        try:
            arch = user_space.suggest(trial)
        except optuna.TrialPruned:
            outcomes.add("pruned")
            assert trial.params["width"] * trial.params["depth"] > 16
        else:
            outcomes.add("ok")
            assert isinstance(trial.params["pool"], int) and user_space.parse(arch.to_string()) == arch
    assert outcomes == {"ok", "pruned"}


def test_continuous_mutables_are_refused_at_creation(user_space):
    with pytest.raises(NasutilError, match="'dropout' is a Numerical"):
        get_space("nni:tiny_nni_space:WithNumerical")
