"""Latches: a count that goes down to zero once, and every waiter goes then.

The latch ``name`` is the persistent semaphore ``name`` whose data is the count
left, in decimal (the same representation as a :class:`~tenure.Counter`'s). The
first use creates it with ``count``; later uses, from any session, find the count
that is left (their ``count`` is only for the creation). ``count_down`` is a
compare-and-set of the data, retried when another change came first, never below
zero; ``wait`` watches the data until the count is zero. A latch does not reset:
delete the semaphore to use the name again.
"""

from __future__ import annotations

import asyncio
import contextlib

from tenure._core.counter_data import counter_value, value_data
from tenure.client import _args
from tenure.client._recipe_session import NamedRecipe, RecipeSession
from tenure.client._semaphore import Semaphore
from tenure.errors import InvalidArgumentError, NotFoundError


class Latch(NamedRecipe):
    """A named count-down latch in the session's node (see the module docstring).

    ``await latch.count_down()`` by the parties that must finish first;
    ``await latch.wait(timeout=30)`` by those that wait for them.
    """

    def __init__(self, session: RecipeSession, name: str, count: int) -> None:
        if type(count) is not int or count < 0:
            raise InvalidArgumentError(f"count must be an int of 0 or more, got {count!r}")
        super().__init__(session, name)
        self.count = count
        self._semaphore = Semaphore(session, self.name)
        self._made = False

    async def count_down(self) -> int:
        """Take one off the count (not below zero); the count left.

        Raises:
            UnavailableError: the answer was lost; whether it counted is unknown.
        """
        while True:
            data = await self._data()
            left = counter_value(self.name, data)
            if left <= 0:
                return 0
            if await self._semaphore.compare_and_set(data, value_data(left - 1)):
                return left - 1

    async def remaining(self) -> int:
        """The count left (0: open)."""
        return counter_value(self.name, await self._data())

    async def wait(self, timeout: float | None = None) -> None:
        """Return once the count is zero (at once if it is).

        ``timeout`` is seconds of this process's clock (None: no limit).

        Raises:
            TimeoutError: still counting after ``timeout``.
            NotFoundError: the latch was deleted meanwhile.
            LostError: the session was lost meanwhile (its loss error).
        """
        wait = _args.timeout(timeout)
        if wait == 0:
            if await self.remaining() <= 0:
                return
            raise TimeoutError(f"latch {self.name!r} is still counting")
        await self._make()
        states = self._semaphore.watch(data=True)
        async with contextlib.aclosing(states), asyncio.timeout(wait):
            async for state in states:
                if not state.exists:
                    raise NotFoundError(f"latch {self.name!r} was deleted while waited for")
                if counter_value(self.name, state.data) <= 0:
                    return

    async def _make(self) -> None:
        """Create the latch with ``count`` if nobody did (once per object)."""
        if not self._made:
            await self._semaphore.create(1, value_data(self.count), exist_ok=True)
            self._made = True

    async def _data(self) -> bytes:
        await self._make()
        return (await self._semaphore.describe()).data
