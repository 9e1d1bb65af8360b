"""Holds of engine sessions (``memory://``, ``tenure://``), read back after a resume.

After a ``ResumeSession`` the client knows nothing of what the session holds: it
reads the engine's account of it (DescribeSession, page by page) and each held
semaphore's owners (DescribeSemaphore), whose entry of the same token carries the
hold's data.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenure._core import DescribeSemaphore, DescribeSession
from tenure.backends._base import Grant, HeldGrant

__all__ = ["read_holds"]

if TYPE_CHECKING:
    from tenure.backends._engine import CommandChannel


async def read_holds(channel: CommandChannel, session_id: int, page_size: int) -> list[HeldGrant]:
    """The session's holds as the engine keeps them now, in (name, hold) order."""
    found: list[HeldGrant] = []
    after = ""
    while True:  # each page starts past the last: as many pages as held names
        page = await channel.call(DescribeSession(session_id, after, page_size))
        data: dict[int, bytes] = {}
        for name in sorted({hold.name for hold in page.holds}):
            command = DescribeSemaphore(session_id, name, owners=True, waiters=False)
            description = (await channel.call(command)).description
            data.update((owner.token, owner.data) for owner in description.owners)
        for hold in page.holds:
            grant = Grant(hold.token, hold.count, hold.lease_ttl, hold.hold)
            found.append(HeldGrant(hold.name, grant, data.get(hold.token, b"")))
        if page.next_after is None:
            return found
        after = page.next_after
