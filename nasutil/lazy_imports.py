"""Package faces that import their parts on first use.

`import nasutil.evaluator` should not cost the import of torch when a command only needs a setting
or a constant from it: a face lists which module holds each public name, and a name is imported the
first time it is read (PEP 562 module `__getattr__`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public name N lives in module `where[N]`."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where[name]), name)
        setattr(importlib.import_module(package), name, value)  # read once, then a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(where) | set(importlib.import_module(package).__dict__))

    return __getattr__, __dir__
