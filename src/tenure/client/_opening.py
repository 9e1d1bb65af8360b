"""``Opening``: what calls that open something return.

``await`` it to get the object (and close or release it yourself later), or use it
in ``async with`` to get the object guarded for the block and closed at its end::

    lease = await sem.acquire()          # awaitable form
    async with sem.acquire() as lease:   # block form
        ...

Used as the object it opens (``client = tenure.connect(url)`` with the ``await``
forgotten, then ``client.create_node(...)``), it says so: its AttributeError names
the call and both forms, rather than only that an ``Opening`` has no such attribute.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar


class _AsyncContext(Protocol):
    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...


T = TypeVar("T", bound=_AsyncContext)


class Opening(Coroutine[Any, Any, T]):
    """A coroutine that is also an async context manager over what it opens.

    Being a real coroutine, it also goes to ``asyncio.create_task`` and
    ``TaskGroup.create_task`` like any other.
    """

    __slots__ = ("_call", "_coro", "_gives", "_opener", "_value")

    def __init__(
        self,
        opener: Callable[[], Coroutine[Any, Any, T]],
        call: str = "this call",
        gives: str = "it",
    ) -> None:
        """``call``: the call that returned it, as a user writes it
        (``tenure.connect(...)``), and ``gives``: a name for what it opens
        (``client``): the error of an attribute looked up on it names both (module
        docstring)."""
        self._opener = opener
        self._call = call
        self._gives = gives
        self._coro: Coroutine[Any, Any, T] | None = None
        self._value: T | None = None

    if not TYPE_CHECKING:  # (to mypy an Opening keeps no attribute of what it opens:
        # it flags the forgotten await before the code runs)

        def __getattr__(self, name: str) -> Any:
            # Only for names the class lacks: a forgotten ``await`` (module docstring).
            if name.startswith("__") or name in self.__slots__:  # (a probe; a copy not made here)
                raise AttributeError(name)
            call, gives = self._call, self._gives
            raise AttributeError(
                f"{type(self).__name__!r} object has no attribute {name!r}: {call} returns an "
                f"Opening, not the {gives}: await it (`{gives} = await {call}`) or use it in "
                f"`async with {call} as {gives}:`",
                name=name,
                obj=self,
            )

    def _started(self) -> Coroutine[Any, Any, T]:
        # The opener runs only when awaited, so an Opening used solely in
        # ``async with`` never leaves an un-awaited coroutine behind.
        if self._coro is None:
            self._coro = self._opener()
        return self._coro

    def __await__(self) -> Generator[Any, None, T]:
        coro = self._coro  # (_started, inline: every awaited acquire comes here)
        if coro is None:
            coro = self._coro = self._opener()
        return coro.__await__()

    def send(self, value: Any) -> Any:
        """Coroutine protocol: step the opening."""
        return self._started().send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        """Coroutine protocol: raise into the opening."""
        if val is None and tb is None:
            # (One argument, as asyncio throws: the three-argument form is deprecated
            # since Python 3.12, a DeprecationWarning on every cancelled acquire.)
            return self._started().throw(typ)
        return self._started().throw(typ, val, tb)

    def close(self) -> None:
        """Coroutine protocol: close the opening if it started."""
        if self._coro is not None:
            self._coro.close()

    async def __aenter__(self) -> T:
        if self._value is not None or self._coro is not None:
            raise RuntimeError("this call was already used; call again to open another")
        self._value = await self._opener()
        entered: T = await self._value.__aenter__()
        return entered

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._value is not None
        return await self._value.__aexit__(exc_type, exc, tb)


class ClosesOnExit:
    """Mixin: ``async with obj:`` returns ``obj`` and awaits ``obj.aclose()`` at the end."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Shielded: a cancelled block still closes what it opened.
        await asyncio.shield(self.aclose())
