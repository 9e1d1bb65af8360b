"""What a session on etcd holds: giving it back, and learning that it was taken.

A hold is its request key (and, for a request that waited, its grant key), on the
session's lease. Releasing deletes them with a Txn sent again until etcd answers
(:func:`delete`). A grant is taken from its holder by a forced delete of its
semaphore (the node's view hears the ``gone/<name>`` marker: :func:`grants_gone`),
by the node being dropped, or by the lease going; when the view may have missed
events, :func:`check_grants` looks for each held key.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from tenure.backends._base import Grant, HeldGrant
from tenure.backends.etcd._keys import add_delete, entry_suffix, get
from tenure.errors import LeaseLostError, UnavailableError

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession

__all__ = ["check_grants", "delete", "drop_hold", "grants_gone", "read_holds"]

log = logging.getLogger("tenure.etcd")


async def drop_hold(s: EtcdSession, name: str, hold: int) -> bool:
    """Delete every key of hold ``hold`` (both requests, both grants); whether any was."""
    suffixes = [entry_suffix(s.lease_id, hold, upgrade) for upgrade in (False, True)]
    return await delete(s, name, hold, suffixes)


async def delete(s: EtcdSession, name: str, hold: int, suffixes: list[bytes]) -> bool:
    """Delete the hold's keys, sending the Txn again while etcd cannot be reached.

    A release must not be lost with a connection (guarantee 6c): a grant left
    behind would stay as long as the session lives, which a working keepalive
    makes forever. So the delete is sent again until etcd answers or the session
    ends (its deadline, a TTL after the last renewal, bounds the wait; a lost
    session's keys go with its lease).
    """
    prefix = s.layout.semaphore(s.node, name)
    request = s.new_txn()
    for suffix in suffixes:
        add_delete(request.success, prefix + b"q/" + suffix)
        add_delete(request.success, prefix + b"g/" + suffix)
    while True:
        try:
            reply = await s.send(request)
            break
        except UnavailableError as error:  # s.send raises the loss once it ended
            log.info("session %d: release of %r not answered, again: %s", s.lease_id, name, error)
    s.held.pop((name, hold), None)
    return any(r.response_delete_range.deleted for r in reply.responses)


def grants_gone(s: EtcdSession, name: str, before: int | None) -> None:
    """``name`` was deleted by force (at revision ``before``): its grants are lost."""
    message = f"semaphore {name!r} was deleted"
    for place, held in list(s.held.items()):
        if place[0] == name and s.ended is None:
            if before is not None and held.token >= before:
                continue  # granted after the delete: a new semaphore's
            del s.held[place]
            s.listener.lease_lost(name, held.token, LeaseLostError(message))


async def check_grants(s: EtcdSession) -> None:
    """Events of the node may have been missed: is every grant still there?"""
    held = list(s.held.items())
    if not held or s.ended is not None:
        return
    # A grant lives as long as its request key (a grant key, if any, goes with it).
    keys = [s.layout.queue(s.node, name) + h.suffix for (name, _), h in held]
    reply = await s.conn.txn([], [get(key) for key in keys])
    missing = [
        (place, h)
        for (place, h), response in zip(held, reply.responses, strict=True)
        if not response.response_range.kvs
    ]
    if not missing:
        return
    await s.diagnose()  # a session that is gone is lost as a whole
    if s.ended is not None:
        return
    for place, h in missing:
        if s.held.get(place) is h:
            del s.held[place]
            message = f"semaphore {place[0]!r} was deleted"
            s.listener.lease_lost(place[0], h.token, LeaseLostError(message))


async def read_holds(s: EtcdSession) -> list[HeldGrant]:
    """Each grant the session holds, as its request key says now (count and data)."""
    found: list[HeldGrant] = []
    for name in sorted({name for name, _ in s.held}):
        state = await s.read(name)
        for (held_name, hold), held in sorted(s.held.items()):
            entry = state.entry(held.suffix) if held_name == name else None
            if entry is not None and entry.granted == held.token:
                grant = Grant(held.token, entry.count, None, hold)
                found.append(HeldGrant(name, grant, entry.data))
    return found
