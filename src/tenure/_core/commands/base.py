"""The base of every command: ``Command[R]``, ``R`` its reply's type."""

from __future__ import annotations

from typing import Generic, TypeVar

R = TypeVar("R", covariant=True)


class Command(Generic[R]):
    """Base of all commands; ``R`` is the reply type."""

    __slots__ = ()
