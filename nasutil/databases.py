"""SQLAlchemy URLs as users give them: the driver nasutil installs for PostgreSQL, and passwords kept out
of every message."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Collection
from pathlib import Path

from nasutil.errors import NasutilError


def sqlalchemy_url(url: str) -> str:
    """`postgresql://...` names the psycopg (3) driver that the `postgres` extra installs; SQLAlchemy's own
    default for it is psycopg2."""
    if url.startswith("postgresql://"):
        return "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def safe_url(url: str) -> str:
    """The URL with any password masked, for messages."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # an unparsable URL has no password we could find
        return url


def first_line(exc: BaseException) -> str:
    """A database error in one line: SQLAlchemy's message and, where it has one, the driver's cause."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    cause = exc.__cause__
    if cause is not None and str(cause).strip():
        reason = f"{reason}: {str(cause).strip().splitlines()[0]}"
    return reason


#: how long a connection to a database server may take before it is given up: a host that never answers
#: would otherwise hold a worker for minutes. $NASUTIL_CONNECT_TIMEOUT_S sets it for every connection;
#: `storage.connect_timeout_s` for a search's study.
CONNECT_TIMEOUT_S = 5.0
MAX_CONNECT_TIMEOUT_S = 3600.0


def default_connect_timeout_s() -> float:
    """$NASUTIL_CONNECT_TIMEOUT_S where it is set, else CONNECT_TIMEOUT_S; a value that is not a number of
    seconds is a one-line error (`abc` or `30s` once fell back to 5 s without a word)."""
    text = os.environ.get("NASUTIL_CONNECT_TIMEOUT_S")
    if text is None or not text.strip():
        return CONNECT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_CONNECT_TIMEOUT_S:
        raise NasutilError(f"NASUTIL_CONNECT_TIMEOUT_S must be a number of seconds above 0 and up to "
                           f"{MAX_CONNECT_TIMEOUT_S:.0f}, got {text!r}")
    return value


def connect_args(url: str, connect_timeout_s: float | None = None) -> dict[str, object]:
    """The driver's connection arguments for an SQLAlchemy URL: a bounded connect for a server, and for
    SQLite a wait for a concurrent writer instead of failing at once."""
    if url.startswith("sqlite"):
        return {"timeout": 30}
    if connect_timeout_s is None:
        connect_timeout_s = default_connect_timeout_s()
    if not (isinstance(connect_timeout_s, (int, float)) and not isinstance(connect_timeout_s, bool)
            and 0 < connect_timeout_s <= MAX_CONNECT_TIMEOUT_S):
        raise ValueError(f"a connect timeout must be a number of seconds above 0 and up to "
                         f"{MAX_CONNECT_TIMEOUT_S:.0f}, got {connect_timeout_s!r}")
    if url.startswith(("postgresql", "mysql")):
        return {"connect_timeout": max(1, math.ceil(connect_timeout_s))}  # libpq and MySQL take whole seconds
    return {}


def refuse_another_programs_sqlite(url: str, ours: Collection[str], what: str) -> None:
    """An existing SQLite file holding tables, none of them `ours` (the names of every version's tables),
    belongs to another program: opening it as a `what` would add nasutil's tables to it. Refused before
    anything is written, and left as it is."""
    import sqlite3

    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        database = make_url(url).database
    except (ArgumentError, ValueError):  # a malformed URL: the connection says why in its own line
        return
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database).expanduser()
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error as exc:  # locked or unreadable: the connection says so in its own line
        if "not a database" in str(exc):
            raise NasutilError(f"{str(path)!r} is not an SQLite database: left as it is; give a new file or a "
                               f"{what}") from None
        return
    if tables and not tables & set(ours):
        shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
        raise NasutilError(f"{str(path)!r} is another program's SQLite database (tables {shown}): left as it is; "
                           f"give a new file or a {what}")
