"""The functions' jsonb description of a semaphore, as a :class:`SemaphoreDescription`."""

from __future__ import annotations

from typing import Any

from tenure._core.values import ClientIdentity, OwnerInfo, SemaphoreDescription, WaiterInfo

__all__ = ["describe_of"]


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
