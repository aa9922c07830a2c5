"""The search-space protocol every built-in and third-party space implements.

A space samples architectures (from a numpy Generator or through an Optuna
trial), parses and prints them, encodes them for predictors, builds them into
`torch.nn.Module`s, and enumerates them where it is finite.
"""

from __future__ import annotations

import functools
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

import numpy as np

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError, NasutilError, NotEnumerableError

if TYPE_CHECKING:
    import optuna
    import torch.nn as nn

    from nasutil.ops import Op

A = TypeVar("A", bound=Arch)

#: the longest architecture text any space parses (a DARTS genotype is about 500 characters)
MAX_ARCH_CHARS = 8192
#: the most classes a network's head may have: ten times ImageNet-21k's, and a head that still fits in memory
MAX_NUM_CLASSES = 1_000_000
#: the deepest nesting of brackets in it
MAX_ARCH_NESTING = 32
#: the most parameters a network a space's settings allow may hold (about 8 GB in fp32): refused unbuilt
MAX_NETWORK_PARAMS = 2e9
#: the most values one feature map of a generated network may hold for one image (1 GiB in fp32), and a forward
#: pass of one image may compute in all (64 GiB, about what training keeps at batch 1): refused unbuilt; both
#: cell presets stay within them at the largest input size
MAX_MAP_VALUES = 2.0 ** 28
MAX_FORWARD_VALUES = 2.0 ** 34
#: how much of a bad architecture an error message quotes
QUOTED_CHARS = 200


def check_arch_text(text: object, space: str) -> None:
    """Bound size and nesting before any parser sees the text: no parser then recurses or allocates without
    limit, whatever a file or a command line holds."""
    if not isinstance(text, str):
        return
    if len(text) > MAX_ARCH_CHARS:
        raise InvalidArchError(f"{space} architecture text of {len(text):,} characters is longer than the "
                               f"{MAX_ARCH_CHARS:,} any space takes")
    depth = deepest = 0
    for char in text:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    if deepest > MAX_ARCH_NESTING:
        raise InvalidArchError(f"{space} architecture text nests brackets {deepest} deep (at most "
                               f"{MAX_ARCH_NESTING})")


def _bounded_parse(parse):
    """Wrap a space's `parse`: bounded input, and an error message that quotes at most QUOTED_CHARS."""
    @functools.wraps(parse)
    def bounded(self, text):
        space = getattr(self, "name", type(self).__name__)
        if not isinstance(text, str):  # bytes, a number, an arch object: not a string form to parse
            raise InvalidArchError(f"{space} parses an architecture's string form, got {type(text).__name__}")
        check_arch_text(text, space)
        try:
            return parse(self, text)
        except InvalidArchError as exc:
            message = str(exc)
            if len(message) <= QUOTED_CHARS + 100:
                raise
            raise InvalidArchError(message[:QUOTED_CHARS] + f"... ({len(message):,} characters)") from None
        except (RecursionError, MemoryError, OverflowError):
            raise InvalidArchError(f"{getattr(self, 'name', '')} architecture text is too large to parse") from None

    bounded.bounded = True
    return bounded


def _checked_build(build):
    """Wrap a space's `build`: it takes the architecture or its text (as the command line does), and an
    architecture of another space is refused in one line before any layer is made."""
    @functools.wraps(build)
    def checked(self, arch, *args, **kwargs):
        model = build(self, self.as_arch(arch), *args, **kwargs)
        from torch import nn  # build has imported torch already

        if not isinstance(model, nn.Module):  # a plugin's build returning a dict failed far away, in a count
            raise NasutilError(f"search space {getattr(self, 'name', type(self).__name__)!r}: build gave a "
                               f"{type(model).__name__}, not a torch.nn.Module")
        return model

    checked.checked = True
    return checked


def _seeded_sample(sample):
    """Wrap a space's `sample`: a seed (or None) is taken for numpy's Generator, as `default_rng` takes it."""
    @functools.wraps(sample)
    def seeded(self, rng=None, *args, **kwargs):
        if not isinstance(rng, np.random.Generator):
            if rng is not None and (isinstance(rng, bool) or not isinstance(rng, numbers.Integral) or rng < 0):
                raise NasutilError(f"sample takes a numpy Generator or a seed (a whole number >= 0), got {rng!r}")
            rng = np.random.default_rng(rng)
        arch = sample(self, rng, *args, **kwargs)
        if not callable(getattr(arch, "to_string", None)):  # a plugin's sample giving text failed far away
            raise NasutilError(f"search space {getattr(self, 'name', type(self).__name__)!r}: sample gave a "
                               f"{type(arch).__name__}, not an architecture (an Arch, with to_string and encode)")
        return arch

    seeded.seeded = True
    return seeded


class SearchSpace(ABC, Generic[A]):
    """A family of CNNs. Subclass it, then register the class under the
    `nasutil.search_spaces` entry-point group (or call `nasutil.registry.register`)."""

    #: registry name, e.g. "nb201"
    name: ClassVar[str]

    def __init_subclass__(cls, **kwargs) -> None:
        """Every space's `parse`, built-in or third-party, gets the same bounds on its input."""
        super().__init_subclass__(**kwargs)
        parse = cls.__dict__.get("parse")
        if parse is not None and not getattr(parse, "bounded", False):
            cls.parse = _bounded_parse(parse)
        for name, wrap, mark in (("build", _checked_build, "checked"), ("sample", _seeded_sample, "seeded")):
            method = cls.__dict__.get(name)
            if method is not None and not getattr(method, mark, False) \
                    and not getattr(method, "__isabstractmethod__", False):
                setattr(cls, name, wrap(method))
    #: one line for `nasutil spaces`
    description: ClassVar[str] = ""
    #: input resolution the space was designed for
    default_input_size: ClassVar[int] = 32
    #: the input resolutions (smallest, largest) its networks are built and predicted for
    input_sizes: ClassVar[tuple[int, int]] = (8, 1024)
    #: channels of the input images
    in_channels: ClassVar[int] = 3

    @classmethod
    def option_version(cls, option: str) -> object:
        """What tells two loads of the same option apart (a file's modification time and size, where the
        option names a file): the registry builds the space again when it changes."""
        return None

    @property
    def fingerprint(self) -> str | None:
        """A digest of what defines this space's networks beyond its name (a generated space's settings,
        a file's content), or None where the name says it all. A study remembers it, so that a search
        resumed after the space changed under the same name is refused rather than mixed."""
        return None

    @abstractmethod
    def sample(self, rng: np.random.Generator) -> A:
        """Draw one valid architecture."""

    @abstractmethod
    def suggest(self, trial: optuna.Trial) -> A:
        """Let an Optuna trial choose the architecture (one parameter per decision)."""

    @abstractmethod
    def parse(self, text: str) -> A:
        """Parse the space's string form; raises `InvalidArchError` with a one-line reason."""

    @abstractmethod
    def build(self, arch: A, num_classes: int = 10, input_size: int | None = None) -> nn.Module:
        """A freshly initialised network for `arch` (CPU, float32, train mode)."""

    @property
    @abstractmethod
    def encoding_size(self) -> int:
        """Length of `arch.encode()` for every arch of this space."""

    @classmethod
    def from_option(cls, option: str) -> SearchSpace:
        """Build a variant from the text after the colon in `NAME:OPTION` (e.g. `nni:ProxylessNAS`)."""
        raise NasutilError(f"search space {cls.name!r} takes no option (got {option!r})")

    def size(self) -> int | None:
        """Number of distinct architectures, or None where unknown/unbounded."""
        return None

    def enumerate(self) -> Iterator[A]:
        """Every distinct architecture, in a fixed order. Finite spaces override this."""
        raise NotEnumerableError(f"search space {self.name!r} cannot be enumerated")

    @staticmethod
    def check_num_classes(num_classes: int) -> int:
        """A classifier head's size, checked before building: 0 once built a head with no outputs."""
        if (isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral)
                or not 0 < num_classes <= MAX_NUM_CLASSES):
            raise NasutilError(f"num_classes must be a whole number from 1 to {MAX_NUM_CLASSES:,}, got {num_classes!r}")
        return int(num_classes)

    def check_input_size(self, size: int | None) -> int:
        """The input size to use (the default for None); one outside `input_sizes` is a usage error."""
        if size is None:
            return self.default_input_size
        low, high = self.input_sizes
        if isinstance(size, bool) or not isinstance(size, int) or not low <= size <= high:
            raise NasutilError(f"search space {self.name!r} takes input sizes {low} to {high}, got {size!r}")
        return size

    def operators(self, arch: A, num_classes: int = 10, input_size: int | None = None) -> list[Op]:
        """The ops one forward pass of one image launches (see `nasutil.ops`).

        The default builds the network and traces it (tens to hundreds of milliseconds);
        a space that knows its structure overrides this with a direct listing, which is
        what makes scoring tens of thousands of candidates with a predictor cheap."""
        from nasutil.op_tracing import trace_ops

        size = self.default_input_size if input_size is None else input_size
        return trace_ops(self.build(arch, num_classes=num_classes, input_size=size), size, self.in_channels)

    def to_string(self, arch: A) -> str:
        return arch.to_string()

    def encode(self, arch: A) -> np.ndarray:
        return arch.encode()

    def as_arch(self, arch: A | str) -> A:
        """`arch` itself where it is an architecture of this space (its text parses back), parsed where it is
        text; anything else, such as another space's architecture, is an `InvalidArchError`."""
        if isinstance(arch, str):
            return self.parse(arch)
        try:
            text = self.to_string(arch)
        except Exception:  # noqa: BLE001 - whatever it is, it has no string form of this space
            raise InvalidArchError(f"{self.name} builds its own architectures or their text, got "
                                   f"{type(arch).__name__}") from None
        try:
            self.parse(text)
        except InvalidArchError as exc:
            raise InvalidArchError(f"not an architecture of {self.name} ({type(arch).__name__}): {exc}") from None
        return arch

    def sample_many(self, n: int, seed: int | None = None) -> list[A]:
        """`n` architectures drawn from one seeded Generator (duplicates possible)."""
        rng = np.random.default_rng(seed)
        return [self.sample(rng) for _ in range(n)]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
