"""The one small interface every backend implements.

A backend keeps the state (nodes, sessions, semaphores) somewhere: in this process
(``memory://``), in a tenure server, or in etcd, PostgreSQL or Redis. The client
layer (:mod:`tenure.client`) builds mutexes, elections and watches over these few
operations, so each recipe is written once for all backends.

Backends push two kinds of news to the client through a :class:`SessionListener`:
the loss of a session, and the loss of one grant. Everything else is a reply.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from tenure._core.values import NodeConfig, NodeDescription, SemaphoreDescription
from tenure.errors import LostError


class Capability(enum.Enum):
    """Abilities a backend may or may not have; callers can require them at connect time."""

    FENCING_TOKENS = "fencing_tokens"  # every grant carries a strictly increasing token
    FIFO = "fifo"  # waiters are served in arrival order
    WATCH = "watch"  # watches are pushed, not polled
    DURABLE = "durable"  # acknowledged state survives a restart of the backend
    SESSION_RECOVERY = "session_recovery"  # sessions survive a lost connection
    LEASE_TTL = "lease_ttl"  # grants may carry a time-to-live that must be renewed


class WatchFeed:
    r"""What a repeating watch reports: the latest state it was sent, for one watcher.

    The backend :meth:`put`\s each state a firing carries, keeping only the latest
    (a watcher that is busy gets the newest state, never a queue of old ones), or
    ``None`` when the watch is gone and a new one must be armed (after a reconnect,
    or from a server that does not send states). :meth:`close` disarms it.
    """

    __slots__ = ("_error", "_has_news", "_latest", "_on_close", "_waiter", "closed")

    def __init__(self, on_close: Callable[[], None]) -> None:
        self._on_close = on_close
        self._latest: SemaphoreDescription | None = None
        self._has_news = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def put(self, description: SemaphoreDescription | None) -> None:
        """A firing's state (None: arm a new watch); replaces one not taken yet."""
        if self.closed or (self._has_news and self._latest is None):
            return  # closed, or already gone: nothing after that counts
        self._latest, self._has_news = description, True
        self._wake()

    def fail(self, error: BaseException) -> None:
        """The session is gone: :meth:`take` raises ``error`` once the news is taken."""
        if self._error is None:
            self._error = error
            self._wake()

    async def take(self) -> SemaphoreDescription | None:
        """Wait for news: the latest state, or None (arm a new watch)."""
        while not self._has_news:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        self._has_news = False
        return self._latest

    def close(self) -> None:
        """Disarm the watch (once)."""
        if not self.closed:
            self.closed = True
            self._on_close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


@dataclass(frozen=True, slots=True)
class Grant:
    """A successful acquire: the fencing token, the count held, and the lease TTL if any."""

    token: int
    count: int
    lease_ttl: float | None = None


class SessionListener(Protocol):
    """Receives a backend session's bad news; called on the event loop."""

    def session_lost(self, error: LostError) -> None:
        """The session ended (expired, or closed by the server)."""

    def lease_lost(self, name: str, token: int, error: LostError) -> None:
        """The grant with ``token`` on semaphore ``name`` ended without a release."""


class BackendSession(Protocol):
    """One session, as the backend sees it."""

    @property
    def session_id(self) -> int:
        """The backend's id of this session."""

    async def acquire(
        self, name: str, *, count: int, data: bytes, timeout: float | None, ephemeral: bool
    ) -> Grant | None:
        """Acquire tokens; None if ``timeout == 0`` and they are not free.

        Raises TimeoutError when a positive timeout passes. If the awaiting task is
        cancelled, the queued request is withdrawn (and a grant that raced with the
        cancellation is released), so a cancelled acquire never leaves a hold behind.
        """

    async def release(self, name: str) -> bool:
        """Release this session's hold on ``name``; whether there was one."""

    async def renew(self, name: str) -> float:
        """Extend a grant that has a lease TTL; the TTL now in force."""

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """Create a persistent semaphore."""

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """Replace a semaphore's data."""

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """Delete a semaphore."""

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """Describe a semaphore; NotFoundError if missing."""

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> tuple[SemaphoreDescription, WatchFeed]:
        """Describe (a missing semaphore has ``exists=False``) and arm a repeating watch.

        The feed reports the state each watched change leaves; closing it disarms
        the watch. If the session is lost, its ``take`` raises the loss error.
        """

    async def close(self) -> None:
        """Close the session cleanly, releasing all it holds."""


class Backend(Protocol):
    """A place where coordination state lives; chosen by URL scheme."""

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What this backend can do."""

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node."""

    async def describe_node(self, name: str) -> NodeDescription:
        """Describe a node."""

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change node settings."""

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node."""

    async def open_session(
        self,
        node: str,
        *,
        timeout: float | None,
        description: str,
        listener: SessionListener,
    ) -> BackendSession:
        """Open a session on ``node``; ``timeout`` is the recovery window."""

    async def aclose(self) -> None:
        """Release the backend's resources; its sessions are closed."""
