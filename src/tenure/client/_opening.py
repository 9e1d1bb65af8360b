"""``Opening``: what calls that open something return.

``await`` it to get the object (and close or release it yourself later), or use it
in ``async with`` to get the object guarded for the block and closed at its end::

    lease = await sem.acquire()          # awaitable form
    async with sem.acquire() as lease:   # block form
        ...
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar


class _AsyncContext(Protocol):
    async def __aenter__(self) -> Any: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...


T = TypeVar("T", bound=_AsyncContext)


class Opening(Generic[T]):
    """An awaitable that is also an async context manager over what it opens."""

    __slots__ = ("_opener", "_value")

    def __init__(self, opener: Callable[[], Awaitable[T]]) -> None:
        self._opener = opener
        self._value: T | None = None

    def __await__(self) -> Generator[Any, None, T]:
        return self._opener().__await__()

    async def __aenter__(self) -> T:
        if self._value is not None:
            raise RuntimeError("this call was already entered; call again to open another")
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
