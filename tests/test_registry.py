"""The registry finds built-in and third-party spaces through the same entry-point group."""

import json

import pytest

from nasutil import NasutilError, SearchSpace, UnknownSpaceError, get_space, list_spaces
from nasutil.registry import register, unregister


class NamelessSpace(SearchSpace):
    """Every method a space needs, and no name: a subclass names it."""

    def sample(self, rng): ...
    def suggest(self, trial): ...
    def parse(self, text): ...
    def build(self, arch, num_classes=10, input_size=None): ...
    @property
    def encoding_size(self):
        return 0


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
    class Probe(NamelessSpace):
        name = "probe"

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


def test_a_class_that_cannot_make_a_space_is_refused_when_registered():
    """An abstract class named nb201 once replaced the built-in space, which then failed when asked for; a
    class without a name was listed as "<class '...NoName'>"."""

    class Unfinished(SearchSpace):
        name = "nb201"

    with pytest.raises(NasutilError, match="cannot make a space: it does not define build"):
        register(Unfinished)
    with pytest.raises(NasutilError, match="needs a name"):
        register(NamelessSpace)
    assert get_space("nb201").name == "nb201"


def test_sample_many_is_reproducible():
    space = get_space("nb201")
    assert space.sample_many(5, seed=3) == space.sample_many(5, seed=3)
    assert space.sample_many(5, seed=3) != space.sample_many(5, seed=4)


@pytest.mark.parametrize("space", ["nb201", "nb101", "darts", "mbconv"])
@pytest.mark.parametrize("text, message", [
    ("[" * 100_000, "longer than"),
    ("{\"a\": " * 40 + "1" + "}" * 40, "nests brackets 40 deep"),
    ("x" * 9000, "longer than"),
])
def test_every_space_bounds_its_architecture_text_before_parsing(space, text, message):
    from nasutil import get_space
    from nasutil.errors import InvalidArchError

    with pytest.raises(InvalidArchError, match=message):
        get_space(space).parse(text)


def test_a_third_party_space_gets_the_same_bounds(installed_plugin):
    from nasutil import get_space
    from nasutil.errors import InvalidArchError

    with pytest.raises(InvalidArchError, match="longer than"):
        get_space("tiny").parse("w" * 10_000)


def test_a_bad_architecture_is_quoted_briefly(cli):
    r = cli("predict", "nb201", "y" * 5000)
    assert r.returncode == 2 and len(r.stderr) < 500 and "(5," in r.stderr, r.stderr[:600]


def test_a_huge_architecture_file_is_refused_before_it_is_read(cli, tmp_path, monkeypatch):
    from nasutil.cli import args

    big = tmp_path / "archs.txt"
    big.write_text("|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|\n" * 2000)
    monkeypatch.setattr(args, "MAX_ARCH_FILE_BYTES", 1000)
    from nasutil import get_space
    from nasutil.errors import NasutilError

    with pytest.raises(NasutilError, match="more than the 1,000 it may"):
        args.read_arch_file(big, get_space("nb201"))


def test_a_plugin_that_breaks_the_space_contract_is_named_in_one_line(installed_plugin):
    """A build giving a dict and a sample giving text failed far from the plugin (`'dict' object has no
    attribute 'parameters'`, `'str' object has no attribute 'to_string'`), as tracebacks."""
    from tiny_nas_space import TinySpace

    class GivesADict(TinySpace):
        name = "gives_a_dict"

        def build(self, arch, num_classes=10, input_size=None):
            return {"weights": []}

    class GivesText(TinySpace):
        name = "gives_text"

        def sample(self, rng):
            return "w8"

    with pytest.raises(NasutilError, match="search space 'gives_a_dict': build gave a dict, not a torch.nn.Module"):
        GivesADict().build("w8")
    with pytest.raises(NasutilError, match="search space 'gives_text': sample gave a str, not an architecture"):
        GivesText().sample(0)


def test_an_arch_that_names_no_space_still_has_a_hash():
    """`Arch.space` is not asked for by the docs; measuring such an arch crashed in its hash."""
    from dataclasses import dataclass

    import numpy as np

    from nasutil import Arch

    @dataclass(frozen=True)
    class Unnamed(Arch):
        width: int

        def to_string(self):
            return f"w{self.width}"

        def encode(self):
            return np.array([self.width], dtype=np.float32)

    assert Unnamed(8).canonical_hash() != Unnamed(16).canonical_hash()
    assert len(Unnamed(8).canonical_hash()) == 32


def test_a_space_registered_under_another_name_than_its_own_is_refused(installed_plugin):
    """Entry point `misnamed`, class `name = "some_other_name"`: `describe misnamed` reported the other name,
    `measure misnamed` this one, and `describe some_other_name` found nothing."""
    from tiny_nas_space import TinySpace

    from nasutil.plugins import PluginError

    with pytest.raises(PluginError, match="TinySpace names itself 'tiny': register it under that name"):
        register(TinySpace, name="misnamed")
    assert "misnamed" not in list_spaces()
