"""What a YDB visit of the ``linearizable`` scenario asks of a session, and YDB's SDK doing it.

:class:`YdbSession` is the narrow seam (:mod:`tools.faults.lin_ydb` records what it
answers; tests give it a face in memory); :class:`SdkSession` is YDB's Python SDK's
asyncio coordination session behind it (``ydb.aio``; its functions are untyped, so its
objects are ``Any`` here).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any, Final, Protocol

import ydb
from ydb.aio.coordination.session import CoordinationSession

#: The database the face answers for (``--ydb-database``'s default).
DATABASE: Final = "/local"
#: A visit's session timeout (the SDK's wait for each answer, and for a grant, too).
SESSION_TIMEOUT_MS: Final = 3000


@dataclass(frozen=True)
class Described:
    """A semaphore as a describe found it (``found``: its status was SUCCESS)."""

    found: bool
    data: bytes = b""
    #: Each owner's session id, with its ``order_id`` (tenure's fencing token).
    owners: dict[int, int] | None = None
    waiters: frozenset[int] = frozenset()

    def token_of(self, session_id: int | None) -> int | None:
        """The token session ``session_id`` holds, None if it is no owner."""
        return None if session_id is None else (self.owners or {}).get(session_id)


class YdbSession(Protocol):
    """What a visit asks of one YDB session (:class:`SdkSession`, or a test's)."""

    @property
    def session_id(self) -> int | None:
        """The session's id (None until its stream started)."""

    async def acquire(self, name: str, limit: int, count: int) -> None:
        """Acquire ``count`` of semaphore ``name`` (made with ``limit`` if missing)."""

    async def release(self, name: str) -> None:
        """Release semaphore ``name`` (or stop waiting for it)."""

    async def describe(self, name: str) -> Described:
        """Semaphore ``name`` with its owners and waiters."""

    async def update(self, name: str, data: bytes) -> None:
        """Set semaphore ``name``'s data."""

    async def close(self) -> None:
        """Close the session (the SDK sends no ``SessionStop``: it expires)."""


class SdkSession:
    """A :class:`YdbSession` of the SDK's asyncio coordination client."""

    def __init__(self, driver: Any, path: str) -> None:
        # (The SDK's functions are untyped: its objects are Any here.)
        self._session: Any = CoordinationSession(driver, path, timeout_millis=SESSION_TIMEOUT_MS)

    @property
    def session_id(self) -> int | None:
        """See :class:`YdbSession`."""
        # The SDK keeps the id to itself (it re-attaches with it); describe's owners
        # name sessions by id, so a visit needs it to find its own.
        found = self._session._reconnector._session_id
        return None if found is None else int(found)

    async def acquire(self, name: str, limit: int, count: int) -> None:
        """See :class:`YdbSession`."""
        await self._session.semaphore(name, limit).acquire(count)

    async def release(self, name: str) -> None:
        """See :class:`YdbSession`."""
        await self._session.semaphore(name).release()

    async def describe(self, name: str) -> Described:
        """See :class:`YdbSession`."""
        got = await self._session.semaphore(name).describe()
        if got.status != ydb.StatusCode.SUCCESS:
            return Described(False)
        owners = {int(o.session_id): int(o.order_id) for o in got.owners}
        waiters = frozenset(int(w.session_id) for w in got.waiters)
        return Described(True, bytes(got.data), owners, waiters)

    async def update(self, name: str, data: bytes) -> None:
        """See :class:`YdbSession`."""
        await self._session.semaphore(name).update(data)

    async def close(self) -> None:
        """See :class:`YdbSession`."""
        await self._session.close()


async def stop_driver(driver: Any, bound: float) -> None:
    """Stop an SDK driver (bounded; one that cannot reach the face stops all the same)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(bound):
            await driver.stop(timeout=int(bound))
