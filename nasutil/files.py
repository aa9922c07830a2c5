"""Reading the files a user names: regular files of bounded size, and JSON that fails in one line.

A size check alone lets special files through: /dev/zero reports size 0 and is read until memory runs
out, and a FIFO blocks until something writes to it. JSON holding an integer of thousands of digits
fails Python's conversion limit with a ValueError that its decode error does not cover, and JSON
giving one key twice in an object is read by `json.loads` as its last value, without a word.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nasutil.errors import NasutilError


def regular_file(path: Path, what: str, max_bytes: int) -> int:
    """The size of `path`, a regular file (or a link to one) of at most `max_bytes`; else a one-line error
    naming it as `what`. OSError (a missing file, say) is the caller's to word."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a device, a pipe or a socket)"
        raise NasutilError(f"{what} {str(path)!r} is {kind}")
    if info.st_size > max_bytes:
        raise NasutilError(f"{what} {str(path)!r} holds {info.st_size:,} bytes, more than the {max_bytes:,} it may")
    return info.st_size


def read_text(path: Path, what: str, max_bytes: int, encoding: str = "utf-8-sig") -> str:
    """The text of the regular file `path` (a byte-order mark dropped by default), read no further than
    `max_bytes` even where it grows meanwhile; every failure one line naming `what`."""
    try:
        regular_file(path, what, max_bytes)
        with path.open("rb") as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise NasutilError(f"{what} {str(path)!r} grew past the {max_bytes:,} bytes it may hold while read")
        return data.decode(encoding)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise NasutilError(f"cannot read {what} {str(path)!r}: {reason}") from None


def nesting_depth(text: str, quotes: str = '"') -> int:
    """How deep brackets and braces nest in `text`, outside strings in `quotes` (a backslash escapes the next
    character in one): measured without recursion, before a parser that recurses once a level (JSON's, Hydra's)
    reaches Python's limit and ends in a traceback thousands of lines long."""
    depth = deepest = 0
    quote, escaped = "", False
    for char in text:
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in quotes:
            quote = char
        elif char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth = max(depth - 1, 0)
    return deepest


class RepeatedKey(ValueError):
    """An object of a JSON text gives one key twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict (`json.loads`'s `object_pairs_hook`), or RepeatedKey where it gives a key twice."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return obj


def parse_json(text: str, what: str) -> Any:
    """`json.loads(text)`, with every way it fails on bad input (a syntax error, nesting too deep, an
    integer too long to convert, a key given twice in one object) one line naming `what`."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except RepeatedKey as exc:
        raise NasutilError(f"{what} gives the key {exc.key[:80]!r} twice in one object (which of its values is "
                           f"meant cannot be told)") from None
    except RecursionError:
        raise NasutilError(f"{what} is not valid JSON: nested too deep") from None
    except json.JSONDecodeError as exc:
        raise NasutilError(f"{what} is not valid JSON: {str(exc).splitlines()[0][:160]}") from None
    except ValueError:  # past Python's limit of digits for converting text to an integer
        raise NasutilError(f"{what} holds an integer too long to read") from None


def write_text_atomically(path: Path, text: str) -> None:
    """`text` into `path` in one step (a temporary file beside it, then a rename): a write that fails part-way
    leaves what was at `path` as it was. An OSError goes to the caller, with no temporary file left."""
    write_atomically(path, lambda tmp: tmp.write_text(text))


def write_atomically(path: Path, write: Callable[[Path], Any]) -> None:
    """`write(file)` into a temporary file beside `path`, then renamed to it in one step: a write that fails
    part-way (a full disk) leaves what was at `path` as it was. An OSError goes to the caller, with no
    temporary file left."""
    import os

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
