"""nasutil: utilization-aware neural architecture search.

Measure how well a CNN uses the GPU it runs on, search cell-based spaces for
networks that use it well, and predict utilization cheaply enough to prune a
search before paying for training.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nasutil.lazy_imports import lazy_attributes

if TYPE_CHECKING:
    from nasutil.arch import Arch
    from nasutil.errors import InvalidArchError, NasutilError, UnknownSpaceError
    from nasutil.registry import get_space, list_spaces, register
    from nasutil.space import SearchSpace

__version__ = "0.1.0"

__all__ = ["Arch", "InvalidArchError", "NasutilError", "SearchSpace", "UnknownSpaceError", "get_space",
           "list_spaces", "register", "__version__"]

# Imported on first use: a command starts (and answers Ctrl-C) before numpy has loaded.
__getattr__, __dir__ = lazy_attributes(__name__, {
    "Arch": "nasutil.arch", "InvalidArchError": "nasutil.errors", "NasutilError": "nasutil.errors",
    "UnknownSpaceError": "nasutil.errors", "get_space": "nasutil.registry", "list_spaces": "nasutil.registry",
    "register": "nasutil.registry", "SearchSpace": "nasutil.space",
})
