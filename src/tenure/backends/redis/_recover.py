"""A Redis session reads its state back: after missed pushes, for holds(), after a resume.

A gap in the inbox's sequence (entries trimmed while the client was away, or lost
by a server restart that was not durable) means pushes were missed: the session
reads what Redis keeps for it (``describe_session``) and settles it with the
:class:`~tenure.backends._ledger.Ledger`'s rules, as ``tenure://`` does after a
re-attach; every watch reads its semaphore again.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from tenure._core import CancelAcquire, QueuedAcquire, Release, SessionState
from tenure._core import HeldGrant as HeldPage
from tenure.backends._base import Grant, HeldGrant
from tenure.backends.redis._codec import decode_count, decode_ttl
from tenure.errors import TenureError

if TYPE_CHECKING:
    from tenure.backends.redis._session import RedisSession

__all__ = ["holds", "reconcile", "take_back"]

log = logging.getLogger("tenure.redis")


async def reconcile(s: RedisSession) -> None:
    """Read what Redis keeps for session ``s`` and agree with it (the Ledger's rules)."""
    if s.ended is not None:
        return
    for watches in list(s.watches.values()):
        for watch in list(watches):
            watch.poke()  # a watched change may have been missed: read again
    if s.ledger.empty:
        return
    holds_raw, waits_raw = await s.call("describe_session", "")
    page = SessionState(
        s.session_id,
        tuple(
            HeldPage(n.decode(), int(t), decode_count(c), decode_ttl(ttl), int(h))
            for n, h, t, c, ttl, _ in holds_raw
        ),
        tuple(
            QueuedAcquire(n.decode(), int(r), decode_count(c), int(h)) for n, h, r, c in waits_raw
        ),
    )
    settled = s.ledger.settle(page, "")
    for (name, hold), token, error in settled.lost:
        s.hear_lost(name, hold, token, error)
    for command in settled.drop:
        log.warning("session %d drops %r: nobody asked for it", s.session_id, command)
        with contextlib.suppress(TenureError):
            if isinstance(command, Release):
                await s.call("release", s.request_key(), command.name, command.hold)
            elif isinstance(command, CancelAcquire):
                await s.call("withdraw", "", command.name, command.hold, command.request_id, "1")


async def holds(s: RedisSession) -> list[HeldGrant]:
    """Session ``s``'s holds as Redis keeps them now, in (name, hold) order."""
    holds_raw, _ = await s.call("describe_session", "")
    found = [
        HeldGrant(n.decode(), Grant(int(t), decode_count(c), decode_ttl(ttl), int(h)), bytes(data))
        for n, h, t, c, ttl, data in holds_raw
    ]
    return sorted(found, key=lambda held: (held.name, held.grant.hold))


def take_back(s: RedisSession, found: Any) -> None:
    """The holds a resume found: held by session ``s`` from now on."""
    s.resumed_holds = []
    for raw_name, hold, token, count, ttl, data in found:
        name = raw_name.decode()
        grant = Grant(int(token), decode_count(count), decode_ttl(ttl), int(hold))
        if grant.lease_ttl is not None:
            s.has_leases = True
        s.ledger.held[(name, grant.hold)] = grant
        s.resumed_holds.append((name, grant, bytes(data)))
