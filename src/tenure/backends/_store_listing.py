"""What the store backends (etcd, Redis, PostgreSQL) share of listing and kill_session.

The arguments of a listing page are checked here, the same way for every store and
as the engine checks them: ``after`` and ``prefix`` are strings of at most
MAX_NAME_BYTES UTF-8 bytes, a session ``after`` a non-negative int, ``limit`` in
[1, MAX_PAGE] (InvalidArgumentError otherwise). Pages are sorted by code point
(Python's ``str`` order, which is also the byte order of UTF-8: Redis's
ZRANGEBYLEX and PostgreSQL's ``COLLATE "C"`` sort the same way).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from tenure._core.values import (
    MAX_NAME_BYTES,
    SemaphoreSummary,
    SessionSummary,
    check_name,
    check_page_limit,
)
from tenure.errors import InvalidArgumentError

__all__ = [
    "ListingModule",
    "StoreListings",
    "check_bound",
    "check_session_after",
    "check_session_id",
    "killed_message",
    "page_args",
]


def check_bound(text: object, what: str = "after") -> str:
    """A name bound of a page (``""``: from the first), or a prefix: a bounded str."""
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{what} must be a string, got {type(text).__name__}")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgumentError(f"{what} must not contain surrogates: {text!r}") from None
    if size > MAX_NAME_BYTES:
        raise InvalidArgumentError(f"{what} is longer than {MAX_NAME_BYTES} bytes")
    return text


def page_args(prefix: object, after: object, limit: object) -> tuple[str, str, int]:
    """``(prefix, after, limit)`` of a semaphore listing, checked."""
    return check_bound(prefix, "prefix"), check_bound(after), check_page_limit(limit)


def check_session_after(after: object) -> int:
    """The ``after`` of a session listing: a non-negative session id."""
    if type(after) is not int or after < 0:
        raise InvalidArgumentError(f"after must be a non-negative session id, got {after!r}")
    return after


def check_session_id(node: object, session_id: object) -> tuple[str, int]:
    """``(node, session_id)`` of a kill_session, checked."""
    name = check_name("node", node)
    if type(session_id) is not int or session_id < 0:
        raise InvalidArgumentError(f"session_id must be a non-negative integer, got {session_id!r}")
    return name, session_id


def killed_message(session_id: int) -> str:
    """What the client of a session an operator ended hears (SessionExpiredError)."""
    return f"session {session_id} was ended by an operator (kill_session)"


class ListingModule(Protocol):
    """A store's listing module: the work of each listing, the backend passed first."""

    async def list_nodes(self, backend: Any, after: str, limit: int) -> list[str]:
        """A page of node names."""
        ...

    async def list_semaphores(
        self, backend: Any, node: str, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """A page of a node's semaphores."""
        ...

    async def list_sessions(
        self, backend: Any, node: str, after: int, limit: int
    ) -> list[SessionSummary]:
        """A page of a node's live sessions."""
        ...

    async def kill_session(self, backend: Any, node: str, session_id: int) -> None:
        """End a live session as its expiry would."""
        ...


class StoreListings:
    """The listing methods of :class:`~tenure.backends._base.Backend` for a store
    backend, done by its listing module (:attr:`listing`)."""

    #: The backend's listing module (``etcd._listing``, ``redis._listing``...).
    listing: ClassVar[ListingModule]

    async def list_nodes(self, *, after: str, limit: int) -> list[str]:
        """See :meth:`tenure.backends._base.Backend.list_nodes`."""
        return await self.listing.list_nodes(self, after, limit)

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """See :meth:`tenure.backends._base.Backend.list_semaphores`."""
        return await self.listing.list_semaphores(self, node, prefix, after, limit)

    async def list_sessions(self, node: str, *, after: int, limit: int) -> list[SessionSummary]:
        """See :meth:`tenure.backends._base.Backend.list_sessions`."""
        return await self.listing.list_sessions(self, node, after, limit)

    async def kill_session(self, node: str, session_id: int) -> None:
        """See :meth:`tenure.backends._base.Backend.kill_session`."""
        await self.listing.kill_session(self, node, session_id)
