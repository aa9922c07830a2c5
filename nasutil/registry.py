"""Search-space registry fed by the `nasutil.search_spaces` entry-point group.

Built-in spaces register through that same group, so a third-party package
adds a space by declaring, in its own pyproject.toml::

    [project.entry-points."nasutil.search_spaces"]
    myspace = "my_package.spaces:MySpace"

Spaces can also be registered at run time with `register` (handy in notebooks
and tests). Entry points are loaded lazily: listing names imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

from nasutil.errors import NasutilError, UnknownSpaceError
from nasutil.space import SearchSpace

ENTRY_POINT_GROUP = "nasutil.search_spaces"

_runtime: dict[str, type[SearchSpace]] = {}
_instances: dict[tuple[str, object], SearchSpace] = {}  # spaces are reused: some (NNI's) are costly to set up


@dataclass(frozen=True)
class SpaceEntry:
    """A registered space: where it comes from, loaded only on demand."""

    name: str
    origin: str  # "module:attr" for entry points, "runtime" for `register`
    _loader: Callable[[], type[SearchSpace]]

    def load(self) -> type[SearchSpace]:
        try:
            cls = self._loader()
        except Exception as exc:  # a broken plugin must not break the listing of the others
            raise NasutilError(f"search space {self.name!r} could not be imported ({self.origin}): {exc}") from exc
        if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
            raise NasutilError(f"entry point {self.name!r} ({self.origin}) is not a nasutil SearchSpace subclass")
        return cls


def register(cls: type[SearchSpace], name: str | None = None) -> type[SearchSpace]:
    """Register a space class at run time (usable as a decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
        raise TypeError(f"{cls!r} is not a SearchSpace subclass")
    _runtime[name or cls.name] = cls
    _instances.clear()
    return cls


def unregister(name: str) -> None:
    _runtime.pop(name, None)
    _instances.clear()


def runtime_registrations() -> dict[str, str]:
    """Run-time registrations as `module:qualname` paths, so worker processes can repeat them."""
    return {name: f"{cls.__module__}:{cls.__qualname__}" for name, cls in _runtime.items()
            if cls.__module__ != "__main__" and "<locals>" not in cls.__qualname__}


def register_path(name: str, path: str) -> None:
    """Import `module:qualname` and register it under `name` (the worker side of `runtime_registrations`)."""
    import pkgutil

    register(pkgutil.resolve_name(path), name)


def entries() -> dict[str, SpaceEntry]:
    """All registered spaces by name; run-time registrations shadow entry points."""
    found: dict[str, SpaceEntry] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, SpaceEntry(ep.name, ep.value, ep.load))
    for name, cls in _runtime.items():
        found[name] = SpaceEntry(name, "runtime", lambda cls=cls: cls)
    return dict(sorted(found.items()))


def list_spaces() -> list[str]:
    return list(entries())


def space_class(name: str) -> type[SearchSpace]:
    known = entries()
    if name not in known:
        choices = ", ".join(known) or "none"
        raise UnknownSpaceError(f"unknown search space {name!r} (known: {choices})")
    return known[name].load()


def get_space(spec: str) -> SearchSpace:
    """A space instance from `NAME` or `NAME:OPTION` (e.g. `nb201`, `nni:ProxylessNAS`)."""
    if not spec or not spec.strip():
        raise UnknownSpaceError("empty search-space name")
    spec = spec.strip()
    name, sep, option = spec.partition(":")
    cls = space_class(name)
    key = (spec, cls.option_version(option) if sep else None)  # a file behind the option may have changed
    if key not in _instances:
        _instances[key] = cls.from_option(option) if sep else cls()
    return _instances[key]
