"""Listings and kill_session on PostgreSQL: one function call each (``_sql_listing``)."""

from __future__ import annotations

from typing import Any, Protocol

from tenure._core.values import (
    ClientIdentity,
    SemaphoreSummary,
    SessionSummary,
    check_name,
    check_page_limit,
)
from tenure.backends._store_listing import (
    check_bound,
    check_session_after,
    check_session_id,
    page_args,
)
from tenure.backends.postgres._calls import Caller

__all__ = ["kill_session", "list_nodes", "list_semaphores", "list_sessions"]


class PgListingHome(Protocol):
    """What the listings ask of their home, the backend they list for."""

    @property
    def caller(self) -> Caller:
        """Runs the schema's functions."""


async def list_nodes(backend: PgListingHome, after: str, limit: int) -> list[str]:
    """See :meth:`tenure.backends._base.Backend.list_nodes`."""
    after, limit = check_bound(after), check_page_limit(limit)
    return [str(name) for name in await backend.caller.call("list_nodes", [after, limit])]


async def list_semaphores(
    backend: PgListingHome, node: str, prefix: str, after: str, limit: int
) -> list[SemaphoreSummary]:
    """See :meth:`tenure.backends._base.Backend.list_semaphores`."""
    node = check_name("node", node)
    prefix, after, limit = page_args(prefix, after, limit)
    rows = await backend.caller.call("list_semaphores", [node, prefix, after, limit])
    return [
        SemaphoreSummary(str(name), int(lim), int(count), int(owners), int(waiters), bool(eph))
        for name, lim, count, owners, waiters, eph in rows
    ]


def _session(row: list[Any]) -> SessionSummary:
    sid, description, host, pid, client, window, created, expires_in, holds, waits = row
    return SessionSummary(
        int(sid),
        str(description),
        ClientIdentity(str(host), int(pid), str(client)),
        float(window),
        None if created is None else float(created),
        None if expires_in is None else float(expires_in),
        int(holds),
        int(waits),
    )


async def list_sessions(
    backend: PgListingHome, node: str, after: int, limit: int
) -> list[SessionSummary]:
    """See :meth:`tenure.backends._base.Backend.list_sessions`."""
    node = check_name("node", node)
    after, limit = check_session_after(after), check_page_limit(limit)
    rows = await backend.caller.call("list_sessions", [node, after, limit])
    return [_session(row) for row in rows]


async def kill_session(backend: PgListingHome, node: str, session_id: int) -> None:
    """See :meth:`tenure.backends._base.Backend.kill_session`: ended in the database as
    its expiry would be; its client hears of it by the notification that sends."""
    node, session_id = check_session_id(node, session_id)
    await backend.caller.call("kill_session", [node, session_id], idempotent=False)
