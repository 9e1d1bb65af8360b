"""Semaphore administration on PostgreSQL: delete, read, watch.

Create and update are one call each (in :class:`~._session.PgSession`); a forced
delete also tells this client's own holders at once, and reading turns the
functions' jsonb into a :class:`SemaphoreDescription`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tenure._core.values import ClientIdentity, OwnerInfo, SemaphoreDescription, WaiterInfo
from tenure.backends.postgres._watch import PgWatch
from tenure.errors import LimitExceededError, UnsupportedError

if TYPE_CHECKING:
    from tenure.backends.postgres._session import PgSession

__all__ = ["delete_semaphore", "describe_of", "read", "watch_semaphore"]


async def delete_semaphore(s: PgSession, name: str, force: bool) -> None:
    """Delete ``name``; forced, its holds are gone and its waits end (NotFound)."""
    await s.call("delete_semaphore", name, force, idempotent=False)
    # Every hold of it is gone now: this client's holders hear so before this
    # returns (other clients' hear it from the notification).
    for session in list(s.backend.sessions.values()):
        if session.node == s.node:
            session.grants_gone(name)


async def read(
    s: PgSession, name: str, *, owners: bool, waiters: bool, missing_ok: bool
) -> SemaphoreDescription:
    """The semaphore now (``exists=False`` if missing and ``missing_ok``, else NotFound)."""
    s.check_alive()
    within = s.retry_window()
    answer = await s.caller.call(
        "describe_semaphore", [s.node, name, owners, waiters, missing_ok, True], within=within
    )
    s.check_alive()
    return describe_of(name, answer)


async def watch_semaphore(
    s: PgSession, name: str, *, data: bool, owners: bool, waiters: bool
) -> PgWatch:
    """Arm a watch (refused without notifications, or past max_watches_per_session)."""
    s.check_alive()
    if not s.backend.notifications:
        raise UnsupportedError(
            "postgres:// cannot watch here: a NOTIFY did not reach this client's LISTEN "
            "connection (a transaction-pooling pgbouncer between them?); connect to "
            "PostgreSQL directly or through session pooling"
        )
    limit = (await s.backend.node_config(s.node)).max_watches_per_session
    if s.watches >= limit:
        raise LimitExceededError(f"max_watches_per_session ({limit}) reached on node {s.node!r}")
    watch = PgWatch(s, name, data=data, owners=owners, waiters=waiters)
    await watch.start()
    return watch


def _identity(host: str | None, pid: int | None, name: str | None) -> ClientIdentity:
    # A session that ended since the row was read is gone from the join: no identity.
    return ClientIdentity(host or "", int(pid or 0), name or "")


def describe_of(name: str, answer: Any) -> SemaphoreDescription:
    """A SemaphoreDescription from ``describe_semaphore``'s jsonb (None: missing)."""
    if answer is None:
        return SemaphoreDescription.missing(name)
    return SemaphoreDescription(
        name=name,
        limit=int(answer["limit"]),
        count=int(answer["count"]),
        data=bytes.fromhex(answer["data"]),
        ephemeral=bool(answer["ephemeral"]),
        owners=tuple(
            OwnerInfo(
                int(sid),
                int(count),
                bytes.fromhex(data),
                int(token),
                description or "",
                _identity(host, pid, client),
                None if since is None else float(since),
            )
            for sid, count, data, token, since, description, host, pid, client in answer["owners"]
            or ()
        ),
        waiters=tuple(
            WaiterInfo(
                int(sid),
                int(count),
                bytes.fromhex(data),
                description or "",
                _identity(host, pid, client),
                None if since is None else float(since),
            )
            for sid, count, data, since, description, host, pid, client in answer["waiters"] or ()
        ),
    )
