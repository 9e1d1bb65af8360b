"""Counters: a named integer in a semaphore's data, changed by compare-and-set.

The counter ``name`` is the persistent semaphore ``name`` (limit 1, held by nobody)
whose data is the value in decimal (:mod:`tenure._core.counter_data`, the format's
one home); a counter never written reads 0, and its first
change creates the semaphore. Every change is a compare-and-set of that data
(:meth:`Semaphore.compare_and_set`, one atomic step in every store), retried when
another change came between the read and the write, as etcd's STM does: an add
is never lost and never counted twice, across sessions, processes and backends.
Watching the semaphore's data (``session.semaphore(name).watch(data=True)``)
follows the value.
"""

from __future__ import annotations

from tenure import lowlevel
from tenure._core.counter_data import MAX_VALUE, MIN_VALUE, counter_value, value_data
from tenure.backends._base import CreateWrite, SwapWrite
from tenure.client._recipe_session import NamedRecipe
from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LimitExceededError,
    NotFoundError,
)


def _whole(what: str, value: object) -> int:
    if type(value) is not int:
        raise InvalidArgumentError(f"{what} must be an int, got {value!r}")
    if not MIN_VALUE <= value <= MAX_VALUE:
        raise InvalidArgumentError(f"{what} must fit in 64 signed bits, got {value}")
    return value


class Counter(NamedRecipe):
    """A named integer shared by every session of the node (module docstring).

    ``await counter.add(1)`` returns the new value; ``get()`` reads it;
    ``compare_and_set(expected, new)`` sets it only if it is ``expected``.
    """

    async def get(self) -> int:
        """The value now (0 for a counter never written)."""
        return counter_value(self.name, await self._data())

    async def add(self, delta: int = 1) -> int:
        """Add ``delta`` (negative subtracts) and return the new value.

        Raises:
            LimitExceededError: the sum would not fit in 64 signed bits (nothing changed).
            PreconditionFailedError: the semaphore of that name holds other data.
            UnavailableError: the answer was lost; whether the add happened is unknown.
        """
        delta = _whole("delta", delta)
        while True:
            data = await self._data()
            new = counter_value(self.name, data) + delta
            if not MIN_VALUE <= new <= MAX_VALUE:
                raise LimitExceededError(
                    f"counter {self.name!r} would be {new}, past 64 signed bits"
                )
            if await self._swap(data, new):
                return new

    async def compare_and_set(self, expected: int, new: int) -> bool:
        """Set the value to ``new`` if it is ``expected`` now; whether it did."""
        expected, new = _whole("expected", expected), _whole("new", new)
        while True:
            data = await self._data()
            if counter_value(self.name, data) != expected:
                return False
            if await self._swap(data, new):
                return True
            # Changed between the read and the swap: compare again with what it is now.

    async def _data(self) -> bytes:
        backend = lowlevel.backend_session(self.session)
        try:
            found = await backend.describe_semaphore(self.name, owners=False, waiters=False)
        except NotFoundError:
            return b""
        return found.data

    async def _swap(self, data: bytes, value: int) -> bool:
        """Compare-and-set the semaphore's data from ``data`` to ``value``; creates the
        semaphore first if it is missing (``data`` empty: the counter was never written)."""
        backend = lowlevel.backend_session(self.session)
        new = value_data(value)
        try:
            return await backend.write_semaphore(self.name, SwapWrite(data, new))
        except NotFoundError:
            if data:
                return False  # deleted since it was read: read again
        try:
            await backend.write_semaphore(self.name, CreateWrite(1, new))
        except AlreadyExistsError:
            return False  # made by another session meanwhile: read again
        return True
