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
from collections.abc import Mapping
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
    ) -> tuple[SemaphoreDescription, asyncio.Future[SemaphoreDescription | None]]:
        """Describe (a missing semaphore has ``exists=False``) and arm a one-shot watch.

        The future completes when a watched aspect changes, with the state the change
        left (None when it is not known: describe again); cancelling it disarms the
        watch. If the session is lost, the future fails with the loss error.
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
