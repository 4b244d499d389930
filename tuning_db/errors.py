"""DBError: the one exception the tuning DB raises, with a one-line message a user can act on.

Callers (the CLI, the compiler's plan lookup) print the message and go on; a deep SQLAlchemy or
driver traceback would bury what went wrong (which file, which server, which version).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import sqlalchemy.exc as sa_exc


class DBError(Exception):
    """A tuning-database problem, with a one-line message naming the database and what is wrong."""


def one_line(e: BaseException) -> str:
    """The first line of an exception's message, driver and SQLAlchemy noise stripped."""
    orig = getattr(e, "orig", None)  # DBAPIError wraps the driver's exception
    text = str(orig if orig is not None else e).strip()
    return (text.splitlines() or [type(e).__name__])[0].strip()


@contextlib.contextmanager
def translated(what: str) -> Iterator[None]:
    """Turn an SQLAlchemy error raised inside the block into `DBError("<what>: <reason>")`."""
    try:
        yield
    except sa_exc.SQLAlchemyError as e:
        raise DBError(f"{what}: {one_line(e)}") from None
