"""SQLAlchemy URLs as users give them: the driver nasutil installs for PostgreSQL, and passwords kept out
of every message."""

from __future__ import annotations


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
