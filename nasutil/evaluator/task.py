"""What an isolated worker runs: a task names its runner by import path and carries plain values, so that a
package above the evaluator (co-location's groups) hands the worker its work without the evaluator
importing it.

In the worker the runner is called as `function(payload, exclusive)` (`exclusive`: a context manager that
holds the device against sibling workers, or None) and returns a result with `to_dict()`. Every task fails
in one shape: a timeout, a dead worker, an out-of-memory error or any other exception comes back as the
task's failed result; a `NasutilError` (a user's mistake) is raised in the caller where the task says so,
else it is a failed result too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from nasutil.errors import NasutilError

R = TypeVar("R")


@dataclass(frozen=True)
class Task(Generic[R]):
    runner: str  # "module:function", imported and called in the worker
    payload: dict[str, Any]  # plain values (JSON-able): what the runner works on
    from_dict: Callable[[dict[str, Any]], R]  # the runner's result again, in the caller
    failed: Callable[[str, str], R]  # (why, device name) -> the failed result
    raise_user_errors: bool = False  # a NasutilError in the worker is raised in the caller

    def outcome(self, kind: str, answer: Any, device_name: str = "") -> R:
        """The result of the worker's answer: ("result", dict), ("user", message) or ("failed", why)."""
        if kind == "result":
            return self.from_dict(answer)
        if kind == "user" and self.raise_user_errors:
            raise NasutilError(answer)
        return self.failed(answer, device_name)
