"""The registry finds built-in and third-party spaces through the same entry-point group."""

import json

import pytest

from nasutil import NasutilError, SearchSpace, UnknownSpaceError, get_space, list_spaces
from nasutil.registry import register, unregister

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
