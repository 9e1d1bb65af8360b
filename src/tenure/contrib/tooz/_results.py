"""What a tooz call returns, and tenure's errors as tooz's.

Every coordinator of a process runs on the process's shared client of its URL
(:func:`tenure.sync.shared_client`: one per process, fork-aware, closed at exit), so
every coordinator that uses the URL talks over one connection, and the server's
pushes to all their sessions arrive in one order with its replies: a coordinator
that breaks another's lock sees, when ``break_`` returns, that the other lost it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

import tooz
from tooz import coordination

from tenure.errors import TenureError, UnavailableError

__all__ = ["Result", "translated"]

T = TypeVar("T")


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """tenure's errors as tooz's: unreachable servers are ToozConnectionError, every
    other error ToozError (the tenure error is the cause); tooz's pass through."""
    try:
        yield
    except UnavailableError as error:
        raise coordination.ToozConnectionError(str(error)) from error
    except TenureError as error:
        raise tooz.ToozError(f"{type(error).__name__}: {error}") from error


class Result(coordination.CoordAsyncResult[T], Generic[T]):
    """What a tooz call returns: the driver does the work in the call (its order is
    the caller's), and ``get()`` gives its value or raises its error."""

    def __init__(self, value: T | None = None, error: Exception | None = None) -> None:
        self._value = value
        self._error = error

    @classmethod
    def of(cls, work: Callable[[], T]) -> Result[T]:
        """Run ``work`` now; its value or its error for ``get()``."""
        try:
            return cls(work())
        except Exception as error:
            return cls(error=error)

    def get(self, timeout: float | None = None) -> T:
        """The call's value, or its error raised (done already: ``timeout`` is moot)."""
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def done(self) -> bool:
        """Always: the call was made."""
        return True
