"""Errors a user can cause and fix; the CLI turns them into one line and exit code 2."""

from __future__ import annotations

import contextlib
import difflib
import errno
import os
import sys
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import NoReturn


class NasutilError(Exception):
    """Base class of every user-facing error (bad input, unknown names, missing data)."""


class UnknownSpaceError(NasutilError, KeyError):
    """A search-space name that no registered plugin provides."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "unknown search space"


class InvalidArchError(NasutilError, ValueError):
    """An architecture string that is malformed or names an invalid architecture."""


class Interrupted(NasutilError):
    """A training stopped by the user (Ctrl-C) before its end: its trial fails with this reason."""


class NotEnumerableError(NasutilError):
    """Asked to enumerate a space that is infinite or too large to list."""


EXIT_USAGE = 2  # what every nasutil command and script exits with on a user error


class NasutilNotice(UserWarning):
    """What a user must hear of even where warnings are hidden: data nasutil repaired or set aside."""


class NasutilDeprecation(NasutilNotice, FutureWarning):
    """A setting of nasutil's own that still works for this release, in its old form."""


@contextlib.contextmanager
def warnings_for_users(prog: str) -> Iterator[None]:
    """Warnings hidden unless $NASUTIL_WARNINGS is set (the libraries underneath warn of much that a user
    cannot act on), but a `NasutilNotice` always shown, in one line: `PROG: warning: ...`."""
    with warnings.catch_warnings():  # restores the filters and showwarning when the block ends
        if not os.environ.get("NASUTIL_WARNINGS"):
            warnings.simplefilter("ignore")
        warnings.simplefilter("always", NasutilNotice)
        shown = warnings.showwarning

        def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
            if issubclass(category, NasutilNotice):
                print(f"{prog}: warning: {message}", file=sys.stderr)
                return
            shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


#: the errors of a write that the disk refused, whichever the file: full, over quota, past the file size limit, read-only
DISK_REFUSALS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def refused_write(exc: BaseException, path: str | os.PathLike[str] | None = None) -> str | None:
    """The one-line message for a write the disk refused (full, over quota, a file past the size limit, a
    read-only file system), naming `path`, else the file the error names, else "the output" (a write to a file
    already open names none); None for any other error. The disk, not the user's input, is what to fix."""
    if not isinstance(exc, OSError) or exc.errno not in DISK_REFUSALS:
        return None
    name = path if path is not None else exc.filename
    where = "the output" if name is None else repr(str(name))
    return f"cannot write {where}: {exc.strerror or os.strerror(exc.errno)}"


def path_error(exc: BaseException) -> str | None:
    """The one-line message for a file or folder the system refused (a missing parent, a file where a
    folder should be, no permission): a path the user gave, in nearly every case; or for a write the disk
    refused (full, over quota, read-only). None for other errors."""
    if not isinstance(exc, OSError):
        return None
    refused = refused_write(exc)
    if refused is not None:
        return refused
    if exc.filename is None:  # a write to a file already open that the disk did not refuse: not the user's to fix
        return None
    reason = exc.strerror or type(exc).__name__
    return f"cannot use {str(exc.filename)!r}: {reason}"


def resource_error(exc: BaseException) -> str | None:
    """The one-line message for an error of size rather than of code, None for any other: memory that ran
    out (Python's MemoryError, torch's out-of-memory errors on the CPU or a GPU), or a recursion past Python's
    limit, which input nested hundreds of levels deep causes. Every command's last resort: the bounds on
    settings and files refuse most such input before it is read or built, naming it."""
    if isinstance(exc, RecursionError):
        return ("input nested too deeply to read (Python's recursion limit was reached): a setting, file or "
                "architecture with brackets or mappings nested hundreds of levels deep?")
    if not (isinstance(exc, MemoryError) or _out_of_memory(exc)):
        return None
    first = (str(exc).splitlines() or [""])[0][:200]
    return (f"out of memory{': ' + first if first else ''} (a smaller network, input size or batch: fewer "
            f"channels, nodes, cells or layers)")


def _out_of_memory(exc: BaseException) -> bool:
    """torch's out-of-memory errors, told without importing torch: its OutOfMemoryError (a GPU's), and the
    RuntimeError its CPU allocator raises ("DefaultCPUAllocator: can't allocate memory")."""
    if any(cls.__name__ == "OutOfMemoryError" for cls in type(exc).__mro__):
        return True
    return isinstance(exc, RuntimeError) and any(s in str(exc) for s in ("can't allocate memory", "out of memory"))


def did_you_mean(unknown: Sequence[str], known: Iterable[str], prefix: str = "",
                 misspelt: Iterable[str] | None = None) -> str:
    """The hint for names nothing reads, `, did you mean PREFIX.NAME?` naming the closest known name of each
    (of those in `misspelt`, where given) that has one, "" where none is close: a near miss, such as `timeout`
    for `timeout_s`, is the usual cause, and a list of everything known leaves the user to spot it."""
    names = sorted(str(k) for k in known)
    guessed = [str(u) for u in (unknown if misspelt is None else misspelt)]
    close = {u: m[0] for u in guessed if (m := difflib.get_close_matches(u, names, n=1))}
    if not close:
        return ""
    if len(unknown) == 1:
        return f", did you mean {prefix}{next(iter(close.values()))}?"
    return f", did you mean {' and '.join(f'{prefix}{m} for {u}' for u, m in close.items())}?"


def fail(message: str) -> NoReturn:
    """End a script on a user error as nasutil's commands do: one line on stderr, exit code 2."""
    print(message, file=sys.stderr)
    raise SystemExit(EXIT_USAGE)
