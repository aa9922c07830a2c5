"""The registry finds built-in and third-party spaces through the same entry-point group."""

import json
import textwrap

import numpy as np
import pytest

from nasutil import NasutilError, SearchSpace, UnknownSpaceError, get_space, list_spaces
from nasutil.registry import register, unregister

TINY_PLUGIN = textwrap.dedent('''
    """A third-party search space: a plain CNN whose only decision is its width."""
    from dataclasses import dataclass

    import numpy as np
    import torch.nn as nn

    from nasutil import Arch, InvalidArchError, SearchSpace

    WIDTHS = (8, 16, 32)


    @dataclass(frozen=True)
    class TinyArch(Arch):
        width: int
        space = "tiny"

        def to_string(self):
            return f"w{self.width}"

        def encode(self):
            return np.array([self.width / 32], dtype=np.float32)


    class TinySpace(SearchSpace):
        name = "tiny"
        description = "a third-party test space"

        def sample(self, rng):
            return TinyArch(int(rng.choice(WIDTHS)))

        def suggest(self, trial):
            return TinyArch(trial.suggest_categorical("width", WIDTHS))

        def parse(self, text):
            if not text.startswith("w") or not text[1:].isdigit() or int(text[1:]) not in WIDTHS:
                raise InvalidArchError(f"bad tiny arch {text!r}")
            return TinyArch(int(text[1:]))

        def build(self, arch, num_classes=10, input_size=None):
            return nn.Sequential(nn.Conv2d(3, arch.width, 3, padding=1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(arch.width, num_classes))

        @property
        def encoding_size(self):
            return 1

        def size(self):
            return len(WIDTHS)

        def enumerate(self):
            return iter(TinyArch(w) for w in WIDTHS)
''')


@pytest.fixture
def installed_plugin(tmp_path):
    """A distribution on a path entry, declaring the space in its entry_points.txt as pip would install it."""
    (tmp_path / "tiny_nas_space.py").write_text(TINY_PLUGIN)
    dist = tmp_path / "tiny_nas_space-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-nas-space\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[nasutil.search_spaces]\ntiny = tiny_nas_space:TinySpace\n")
    return {"PYTHONPATH": str(tmp_path)}


def test_builtins_are_registered():
    assert {"nb201", "nb101", "darts", "mbconv", "nni"} <= set(list_spaces())


def test_third_party_entry_point_is_found_by_name(cli, installed_plugin):
    listed = cli("spaces", "--json", env=installed_plugin)
    assert listed.returncode == 0, listed.stderr
    rows = {json.loads(line)["name"]: json.loads(line) for line in listed.stdout.splitlines()}
    assert rows["tiny"]["origin"] == "tiny_nas_space:TinySpace"
    assert rows["tiny"]["description"] == "a third-party test space"
    sampled = cli("sample", "tiny", "-n", "3", "--unique", env=installed_plugin)
    assert sampled.returncode == 0, sampled.stderr
    assert sorted(sampled.stdout.split()) == ["w16", "w32", "w8"]
    described = cli("describe", "tiny", "w16", "--json", env=installed_plugin)
    assert json.loads(described.stdout)["params"] == 3 * 16 * 9 + 16 + 16 * 10 + 10


def test_runtime_registration_and_unknown_names():
    class Probe(SearchSpace):
        name = "probe"

        def sample(self, rng): ...
        def suggest(self, trial): ...
        def parse(self, text): ...
        def build(self, arch, num_classes=10, input_size=None): ...
        @property
        def encoding_size(self):
            return 0

    register(Probe)
    try:
        assert isinstance(get_space("probe"), Probe)
        with pytest.raises(NasutilError, match="takes no option"):
            get_space("probe:something")
    finally:
        unregister("probe")
    with pytest.raises(UnknownSpaceError, match="unknown search space 'probe'"):
        get_space("probe")
    with pytest.raises(UnknownSpaceError, match="empty"):
        get_space("")


def test_sample_many_is_reproducible():
    space = get_space("nb201")
    assert space.sample_many(5, seed=3) == space.sample_many(5, seed=3)
    assert space.sample_many(5, seed=3) != space.sample_many(5, seed=4)
