"""nasutil: utilization-aware neural architecture search.

Measure how well a CNN uses the GPU it runs on, search cell-based spaces for
networks that use it well, and predict utilization cheaply enough to prune a
search before paying for training.
"""

from nasutil.arch import Arch
from nasutil.errors import InvalidArchError, NasutilError, UnknownSpaceError
from nasutil.registry import get_space, list_spaces, register
from nasutil.space import SearchSpace

__version__ = "0.1.0"

__all__ = ["Arch", "InvalidArchError", "NasutilError", "SearchSpace", "UnknownSpaceError", "get_space",
           "list_spaces", "register", "__version__"]
