"""The architecture value that crosses every box of the pipeline.

An `Arch` is immutable, prints as a string that its space parses back
(`space.parse(str(arch)) == arch`), has a canonical hash under which equivalent
architectures (e.g. isomorphic NAS-Bench-101 graphs) coincide, and a fixed-length
numeric encoding that predictors consume.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np


class Arch(ABC):
    """Base of every space's architecture value. Subclasses are frozen dataclasses."""

    space: ClassVar[str]

    @abstractmethod
    def to_string(self) -> str:
        """The space's own text form; `space.parse` inverts it exactly."""

    def canonical_key(self) -> str:
        """Text that is equal for equivalent architectures (default: the string itself)."""
        return self.to_string()

    def canonical_hash(self) -> str:
        """A short stable digest of `canonical_key`, namespaced by the space."""
        space = getattr(self, "space", None) or type(self).__qualname__  # a plugin's Arch may not name its space
        digest = hashlib.sha256(f"{space}\0{self.canonical_key()}".encode()).hexdigest()
        return digest[:32]

    @abstractmethod
    def encode(self) -> np.ndarray:
        """A fixed-length float32 vector (same length for every arch of the space)."""

    def __str__(self) -> str:
        return self.to_string()
