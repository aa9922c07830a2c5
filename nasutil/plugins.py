"""One registry behind every kind of plugin: search spaces, predictor kinds, co-location strategies, cell ops.

A kind names its entry-point group and what a plugin must give. Its values come from the group (each
loaded on first use), from built-ins its module defines, or from `register` at run time, which shadows
both. A plugin that cannot be loaded (its import fails, or it gives a value of the wrong type) is skipped
with a `PluginWarning` naming it and the error; asking for it by name raises that error as one line, so
one broken package never takes the others away.

Worker processes repeat this process's run-time registrations of every kind: `runtime_registrations()`
names each by import path, `restore_registrations` registers them again in the worker. One the worker
cannot rebuild is an error only where it is asked for.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from nasutil.errors import NasutilError, NasutilNotice

T = TypeVar("T")

#: every registry built so far, by entry-point group: what `runtime_registrations` collects
_REGISTRIES: dict[str, Registry[Any]] = {}


class PluginWarning(UserWarning):
    """A plugin that could not be loaded was skipped."""


class PluginClashWarning(PluginWarning, NasutilNotice):
    """A plugin given the name of another package's plugin was skipped (shown by the command line too)."""


class PluginError(NasutilError, TypeError):
    """A value registered at run time that is not of its kind."""


def class_path(value: object) -> str | None:
    """`module:qualname` of a class or function that another process can import again; None for one
    defined in `__main__` or inside a function."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not module or not qualname or module in ("__main__", "__mp_main__") or "<locals>" in qualname:
        return None
    return f"{module}:{qualname}"


def global_path(value: object, modules: Iterable[str | None]) -> str | None:
    """`module:NAME` of the first of `modules` that binds a global NAME to `value` itself: how a registered
    value that is not a class (a cell op, say) is found again in another process."""
    for module in modules:
        if not module or module in ("__main__", "__mp_main__") or module not in sys.modules:
            continue
        name = next((k for k, v in vars(sys.modules[module]).items() if v is value), None)
        if name is not None:
            return f"{module}:{name}"
    return None


#: the distribution whose entry points are nasutil's own (its spaces and predictor kinds)
OWN_PACKAGE = "nasutil"


def _package(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return (dist.metadata["Name"] or "?") if dist is not None else "?"


def _detail(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class Registry(Generic[T]):
    """The plugins of one kind, by name.

    `accept(value, name)` returns what is stored for a loaded or registered value (the value itself, or an
    instance built from a class) or raises TypeError saying what is wrong with it; `path_of(value)` names a
    run-time registration by import path for worker processes (None where it cannot be named)."""

    def __init__(self, group: str, kind: str, accept: Callable[[object, str], T], *, owner: str,
                 builtin: dict[str, T] | None = None, path_of: Callable[[T], str | None] = class_path,
                 unknown: str = "unknown {kind} {name!r} (known: {known})",
                 error: type[NasutilError] = NasutilError, rebuild_hint: str = "it must be importable") -> None:
        self.group = group
        self.kind = kind
        self.owner = owner  # the module that builds this registry: a worker imports it to restore registrations
        self._accept = accept
        self._path_of = path_of
        self._unknown = unknown
        self._error = error
        self._rebuild_hint = rebuild_hint
        self._builtin: dict[str, T] = builtin if builtin is not None else {}
        self._runtime: dict[str, T] = {}
        self._loaded: dict[str, T] = {}
        self._broken: dict[str, str] = {}  # entry points that did not load, with why
        self._unbuilt: dict[str, str] = {}  # run-time registrations a worker could not repeat, with why
        self._clashes: set[tuple[str, str]] = set()  # entry points skipped for another's name, warned once
        self._lock = threading.Lock()
        _REGISTRIES[group] = self

    # ---- registering

    def register(self, name: str, value: object) -> T:
        """Register `value` under `name` at run time; it shadows a built-in or installed one of that name."""
        try:
            accepted = self._accept(value, name)
        except TypeError as exc:
            raise PluginError(f"{self.kind} {name!r}: {_detail(exc)}") from None
        with self._lock:
            self._runtime[name] = accepted
            self._unbuilt.pop(name, None)
        return accepted

    def unregister(self, name: str) -> None:
        with self._lock:
            self._runtime.pop(name, None)
            self._unbuilt.pop(name, None)

    def register_path(self, name: str, path: str) -> T:
        """Import `module:qualname` and register it under `name` (the worker side of `runtime_paths`)."""
        return self.register(name, pkgutil.resolve_name(path))

    # ---- looking up

    def _entry_points(self) -> dict[str, EntryPoint]:
        """The group's entry points by name; built-in names are not overridden. Where two packages give one
        name, nasutil's own wins (a plugin's `nb201` once replaced the built-in space without a word, and
        searches then failed on the profile), else the first found; the other is skipped with a warning."""
        found: dict[str, EntryPoint] = {}
        for ep in entry_points(group=self.group):
            if ep.name in self._builtin:
                continue
            kept = found.get(ep.name)
            if kept is None:
                found[ep.name] = ep
                continue
            if _package(ep) == OWN_PACKAGE and _package(kept) != OWN_PACKAGE:
                found[ep.name] = ep
                self._warn_clash(kept=ep, skipped=kept)
            else:
                self._warn_clash(kept=kept, skipped=ep)
        return found

    def _warn_clash(self, kept: EntryPoint, skipped: EntryPoint) -> None:
        key = (skipped.name, skipped.value)
        with self._lock:
            if key in self._clashes:
                return
            self._clashes.add(key)
        owner = "nasutil's own" if _package(kept) == OWN_PACKAGE else f"the one of package {_package(kept)!r}"
        warnings.warn(f"{self.kind} {skipped.name!r} of package {_package(skipped)!r} ({skipped.value}) has the name "
                      f"of {owner} ({kept.value}); skipped: give it another name", PluginClashWarning,
                      stacklevel=4)

    def _load(self, ep: EntryPoint) -> T:
        """The entry point's value, loaded once; a broken one warns once and raises its one-line error."""
        with self._lock:
            if ep.name in self._loaded:
                return self._loaded[ep.name]
            failure = self._broken.get(ep.name)
        if failure is None:
            try:  # not under the lock: importing a plugin may register things itself
                value = self._accept(ep.load(), ep.name)
            except Exception as exc:
                failure = f"{self.kind} {ep.name!r} ({ep.value}) could not be loaded: {_detail(exc)}"
                with self._lock:
                    self._broken[ep.name] = failure
                warnings.warn(f"{failure}; skipped", PluginWarning, stacklevel=3)
            else:
                with self._lock:
                    return self._loaded.setdefault(ep.name, value)
        raise NasutilError(failure)

    def get(self, name: str) -> T:
        """The value registered under `name`; a one-line error for an unknown name (naming the known ones),
        a plugin that did not load, or a registration a worker could not repeat."""
        with self._lock:
            if name in self._runtime:
                return self._runtime[name]
            if name in self._unbuilt:
                raise NasutilError(self._unbuilt[name])
            if name in self._builtin:
                return self._builtin[name]
            if name in self._loaded:
                return self._loaded[name]
        ep = self._entry_points().get(name)
        if ep is not None:
            return self._load(ep)
        raise self._error(self._unknown.format(kind=self.kind, name=name, known=", ".join(self.names()) or "none"))

    def items(self) -> dict[str, T]:
        """Every value that loads, by name: built-ins first in their order, then the others sorted. Loads every
        entry point; a broken one is skipped (with a warning, the first time)."""
        installed: dict[str, T] = {}
        for name, ep in self._entry_points().items():
            try:
                installed[name] = self._load(ep)
            except NasutilError:
                continue
        with self._lock:
            installed.update(self._runtime)
            unbuilt = set(self._unbuilt)
            builtin = {name: installed.pop(name, value) for name, value in self._builtin.items()
                       if name not in unbuilt}
        return {**builtin, **{name: installed[name] for name in sorted(installed) if name not in unbuilt}}

    def names(self) -> list[str]:
        return list(self.items())

    def origins(self) -> dict[str, str]:
        """Every name and where it comes from (an entry point's `module:attr`, "built-in" or "runtime"),
        sorted by name, loading nothing."""
        found = {name: ep.value for name, ep in self._entry_points().items()}
        with self._lock:
            found.update({name: "built-in" for name in self._builtin})
            found.update({name: "runtime" for name in (*self._runtime, *self._unbuilt)})
        return dict(sorted(found.items()))

    # ---- workers

    def runtime_paths(self) -> dict[str, str]:
        """Run-time registrations as import paths for a worker to repeat ("" for one it cannot import). One that
        only repeats its installed entry point (a built-in kind registering itself on import) is left out."""
        with self._lock:
            runtime = dict(self._runtime)
        if not runtime:
            return {}
        installed = {name: ep.value for name, ep in self._entry_points().items()}
        paths = {name: self._path_of(value) or "" for name, value in runtime.items()}
        return {name: path for name, path in sorted(paths.items()) if not path or path != installed.get(name)}

    def restore(self, paths: dict[str, str]) -> None:
        """Register again what `runtime_paths` named; one that cannot be rebuilt here is recorded, and raised
        only where it is asked for."""
        for name, path in paths.items():
            if not path:
                why = (f"{self.kind} {name!r} was registered at run time where a worker cannot import it "
                       f"(in __main__ or inside a function)")
            else:
                try:
                    self.register_path(name, path)
                    continue
                except Exception as exc:
                    why = (f"{self.kind} {name!r} could not be rebuilt in the worker from {path} "
                           f"({self._rebuild_hint}): {_detail(exc)}")
            with self._lock:
                self._runtime.pop(name, None)
                self._unbuilt[name] = why


def runtime_registrations() -> dict[str, dict[str, Any]]:
    """Every run-time registration of every kind in this process, as plain values a worker process is
    given: by entry-point group, the module that builds the registry and each registration's import path."""
    out = {}
    for group, registry in sorted(_REGISTRIES.items()):
        paths = registry.runtime_paths()
        if paths:
            out[group] = {"owner": registry.owner, "entries": paths}
    return out


def restore_registrations(registrations: dict[str, dict[str, Any]]) -> None:
    """Repeat, in a worker process, the registrations `runtime_registrations` collected in its parent."""
    for group, data in registrations.items():
        importlib.import_module(data["owner"])  # builds the registry, as importing it does in the parent
        _REGISTRIES[group].restore(data["entries"])
