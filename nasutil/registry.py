"""Search-space registry fed by the `nasutil.search_spaces` entry-point group.

Built-in spaces register through that same group, so a third-party package
adds a space by declaring, in its own pyproject.toml::

    [project.entry-points."nasutil.search_spaces"]
    myspace = "my_package.spaces:MySpace"

Spaces can also be registered at run time with `register` (handy in notebooks
and tests). A space's module is imported when it is first asked for (listing
every name imports every space's module, which loads without torch); a broken
plugin behaves as every kind's does (`nasutil.plugins`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from nasutil.errors import UnknownSpaceError
from nasutil.plugins import PluginError, Registry
from nasutil.space import SearchSpace

ENTRY_POINT_GROUP = "nasutil.search_spaces"


def _accept(value: object, name: str) -> type[SearchSpace]:
    """A class that can make a space; one with abstract methods left would shadow a space of its name and
    fail only when that is asked for."""
    if not (isinstance(value, type) and issubclass(value, SearchSpace)):
        raise TypeError("it is not a nasutil SearchSpace subclass")
    if inspect.isabstract(value):
        raise TypeError(f"{value.__qualname__} cannot make a space: it does not define "
                        f"{', '.join(sorted(value.__abstractmethods__))}")
    own = getattr(value, "name", None)
    if isinstance(own, str) and own != name:  # results would carry one name and commands take the other
        raise TypeError(f"{value.__qualname__} names itself {own!r}: register it under that name (the entry "
                        f"point's name and the class's `name` must agree)")
    return value


SPACES: Registry[type[SearchSpace]] = Registry(ENTRY_POINT_GROUP, "search space", _accept, owner=__name__,
                                               error=UnknownSpaceError)
_instances: dict[tuple[str, object], SearchSpace] = {}  # spaces are reused: some (NNI's) are costly to set up


@dataclass(frozen=True)
class SpaceEntry:
    """A registered space: where it comes from, loaded only on demand."""

    name: str
    origin: str  # "module:attr" for entry points, "runtime" for `register`
    _loader: Callable[[], type[SearchSpace]]

    def load(self) -> type[SearchSpace]:
        return self._loader()


def register(cls: type[SearchSpace], name: str | None = None) -> type[SearchSpace]:
    """Register a space class at run time (usable as a decorator), under its `name` attribute unless `name`
    is given: a class with neither is refused rather than listed under its repr."""
    label = name if name is not None else getattr(cls, "name", None)
    if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
        label = label if isinstance(label, str) else repr(cls)  # refused by its kind, in the registry's words
    elif not isinstance(label, str) or not label.strip() or any(c.isspace() or c == ":" for c in label):
        raise PluginError(f"search space {getattr(cls, '__qualname__', cls)!r:.60}: it needs a name (a class "
                          f"attribute `name`, or register(cls, name=...)) without spaces or ':', got {label!r}")
    SPACES.register(label, cls)
    _instances.clear()
    return cls


def unregister(name: str) -> None:
    SPACES.unregister(name)
    _instances.clear()


def runtime_registrations() -> dict[str, str]:
    """Run-time space registrations as `module:qualname` paths (all kinds at once: `nasutil.plugins`)."""
    return {name: path for name, path in SPACES.runtime_paths().items() if path}


def register_path(name: str, path: str) -> None:
    """Import `module:qualname` and register it under `name` (the worker side of `runtime_registrations`)."""
    SPACES.register_path(name, path)
    _instances.clear()


def entries() -> dict[str, SpaceEntry]:
    """All registered spaces by name, loading none; run-time registrations shadow entry points."""
    return {name: SpaceEntry(name, origin, lambda name=name: SPACES.get(name))
            for name, origin in SPACES.origins().items()}


def list_spaces() -> list[str]:
    """The names of the spaces that load (a broken plugin is left out, with a warning)."""
    return SPACES.names()


def space_class(name: str) -> type[SearchSpace]:
    return SPACES.get(name)


def get_space(spec: str) -> SearchSpace:
    """A space instance from `NAME` or `NAME:OPTION` (e.g. `nb201`, `nni:ProxylessNAS`)."""
    if not isinstance(spec, str):
        raise UnknownSpaceError(f"a search-space name is text (e.g. 'nb201'), got {type(spec).__name__} {spec!r:.40}")
    if not spec.strip():
        raise UnknownSpaceError("empty search-space name")
    spec = spec.strip()
    name, sep, option = spec.partition(":")
    cls = space_class(name)
    key = (spec, cls.option_version(option) if sep else None)  # a file behind the option may have changed
    if key not in _instances:
        _instances[key] = cls.from_option(option) if sep else cls()
    return _instances[key]
