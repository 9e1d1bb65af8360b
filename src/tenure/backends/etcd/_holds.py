"""What a session on etcd holds: giving it back, learning that it was taken, reading it back.

A hold is its request key (and, for a request that waited, its grant key), on the
session's lease; while it waits for an upgrade it has a second request (the
other mark, ``+`` or not). Releasing deletes every key of the hold, both marks,
in one Txn: the hold and a queued upgrade of it, as the contract says. A grant is
taken from its holder by a forced delete of its semaphore (the node's view hears
the ``gone/<name>`` marker: :meth:`Holds.grants_gone`), by the node being
dropped, or by the lease going; when the view may have missed events,
:meth:`Holds.check_grants` reads each held semaphore back.
"""

from __future__ import annotations

import logging
import time
from typing import Final, Protocol

from aetcd.rpc import rpc_pb2

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import add_compare_create, add_delete, add_put, get_prefix
from tenure.backends._base import Grant, HeldGrant
from tenure.backends._store import SessionLosses, SessionView
from tenure.backends.etcd._keys import encode
from tenure.backends.etcd._queue import QueueEntry, SemState
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender
from tenure.errors import LeaseLostError

__all__ = ["Holds"]

log = logging.getLogger("tenure.etcd")

#: Semaphores read per Txn when checking grants (etcd allows 128 ops by default).
READS_PER_TXN: Final = 64


class HoldsHome(SessionView, SessionLosses, Protocol):
    """What :class:`Holds` ask of the session they keep: its end and ledger, and to be
    told of a grant lost."""


class Holds:
    """The holds of one session (module docstring): its keys, its Txns, its record (why
    it is gone, if it is), the channel to etcd (reads of many semaphores at once); and,
    once bound, the session it tells of lost grants."""

    def __init__(
        self, keys: SessionKeys, sender: TxnSender, record: SessionRecord, conn: EtcdClient
    ) -> None:
        self._keys, self._sender, self._record, self._conn = keys, sender, record, conn
        self._session: HoldsHome

    def bind(self, session: HoldsHome) -> None:
        """The session whose holds these are (made after them: :meth:`EtcdStore.bind`)."""
        self._session = session

    async def drop(self, name: str, hold: int) -> bool:
        """Delete every key of hold ``hold`` (both requests, both grants); whether any was.

        Two range deletes, the hold's requests and its grants: a hold's keys are its
        suffix, with the upgrade's mark ``+`` or without, and no other key of the queue
        starts with it (fixed-width ids), so each range is ``[key, key + ",")`` (``,``
        is the byte after ``+``).
        """
        prefix, suffix = self._keys.prefix(name), self._keys.suffix(hold)
        request = self._sender.new_txn()
        success = request.success
        delete = success.add().request_delete_range
        delete.key, delete.range_end = prefix + b"q/" + suffix, prefix + b"q/" + suffix + b","
        delete = success.add().request_delete_range
        delete.key, delete.range_end = prefix + b"g/" + suffix, prefix + b"g/" + suffix + b","
        reply = await self._sender.send(request)
        return any(r.response_delete_range.deleted for r in reply.responses)

    def grants_gone(self, name: str, before: int | None) -> None:
        """``name`` was deleted by force (at revision ``before``): its grants are lost."""
        session = self._session
        message = f"semaphore {name!r} was deleted"
        for (held_name, hold), grant in list(session.ledger.held.items()):
            if held_name != name or session.ended is not None:
                continue
            if before is not None and grant.token >= before:
                continue  # granted after the delete: a new semaphore's
            session.grant_lost(name, hold, grant.token, LeaseLostError(message))
        if before is not None:  # (an open acquire's older grant, answered later)
            session.ledger.lose_below(name, before, LeaseLostError(message))

    async def _states(self, names: list[str]) -> dict[str, SemState]:
        """Each semaphore of ``names``, read now (a few Txns)."""
        states: dict[str, SemState] = {}
        for start in range(0, len(names), READS_PER_TXN):
            chunk = names[start : start + READS_PER_TXN]
            prefixes = [self._keys.prefix(name) for name in chunk]
            reply = await self._conn.txn([], [get_prefix(prefix) for prefix in prefixes])
            revision = int(reply.header.revision)
            for name, prefix, response in zip(chunk, prefixes, reply.responses, strict=True):
                kvs = response.response_range.kvs
                states[name] = SemState.parse(name, prefix, kvs, revision)
        return states

    def _found(self, state: SemState, hold: int, token: int) -> int | None:
        """The count of hold ``hold``'s grant ``token`` in ``state`` (None: not there)."""
        for entry in state.entries:
            if entry.place == (self._keys.lease_id, hold) and entry.granted == token:
                return entry.count
        return None

    async def check_grants(self) -> None:
        """Events of the node may have been missed: is every grant still there?"""
        session = self._session
        judged = dict(session.ledger.held)
        if not judged or session.ended is not None:
            return
        states = await self._states(sorted({name for name, _ in judged}))
        missing = [
            (place, grant)
            for place, grant in judged.items()
            if self._found(states[place[0]], place[1], grant.token) is None
        ]
        if not missing:
            return
        await self._record.diagnose()  # a session that is gone is lost as a whole
        if session.ended is not None:
            return
        for (name, hold), grant in missing:
            if session.ledger.held.get((name, hold)) is grant:
                message = f"semaphore {name!r} was deleted"
                session.grant_lost(name, hold, grant.token, LeaseLostError(message))

    async def read(self) -> list[HeldGrant]:
        """Each grant the session holds, as its request key says now (count and data)."""
        lease_id = self._keys.lease_id
        held = sorted(self._session.ledger.held.items())
        states = await self._states(sorted({name for (name, _), _ in held}))
        found: list[HeldGrant] = []
        for (name, hold), grant in held:
            for entry in states[name].entries:
                if entry.place == (lease_id, hold) and entry.granted == grant.token:
                    found.append(
                        HeldGrant(name, Grant(grant.token, entry.count, None, hold), entry.data)
                    )
        return found

    async def take_back(self) -> list[HeldGrant]:
        """After a resume: the session's granted requests are its holds; its requests
        that wait are withdrawn (nobody waits for them any more), and its lock_all
        placeholders go. A lock_all set that the previous owner had committed (a
        member granted: the set is held, :mod:`._set_wait`) but not finished is
        finished here: its members' grants are put, so the set is held whole."""
        layout, lease_id = self._keys.layout, self._keys.lease_id
        request = rpc_pb2.LeaseTimeToLiveRequest(ID=lease_id, keys=True)
        reply = await self._conn.lease_call("LeaseTimeToLive", request)
        keys = [bytes(key) for key in reply.keys]  # read after the fence: what is there to stay
        prefix = self._keys.root
        names = sorted(
            {
                layout.unescape(key[len(prefix) :].split(b"/", 1)[0].decode())
                for key in keys
                if key.startswith(prefix)
            }
        )
        states = await self._states(names)
        # A set's members share their create_revision; one granted means all are.
        committed = {
            entry.created
            for state in states.values()
            for entry in state.entries
            if entry.sid == lease_id and entry.set_size and entry.granted
        }
        found: list[HeldGrant] = []
        for name, state in states.items():
            semaphore = self._keys.prefix(name)
            waiting = [key for key in keys if key.startswith(semaphore + b"p/")]
            for entry in state.entries:
                if entry.sid != lease_id:
                    continue
                if not entry.granted and entry.set_size and entry.created in committed:
                    entry.granted = await self._grant_member(semaphore, entry)
                if entry.granted:
                    grant = Grant(entry.granted, entry.count, None, entry.hold)
                    found.append(HeldGrant(name, grant, entry.data))
                else:
                    waiting.append(semaphore + b"q/" + entry.suffix)
            if waiting:
                withdraw = self._sender.new_txn()
                for key in waiting:
                    add_delete(withdraw.success, key)
                await self._sender.send(withdraw)
        return sorted(found, key=lambda held: (held.name, held.grant.hold))

    async def _grant_member(self, semaphore: bytes, entry: QueueEntry) -> int:
        """Put the grant key of ``entry``, a member of a committed lock_all set (as
        :meth:`._set_wait.SetWaiter.finish` would have): its token, or 0 if its
        request went meanwhile (a forced delete: then it is withdrawn as any)."""
        request = self._sender.new_txn()
        add_compare_create(request.compare, semaphore + b"q/" + entry.suffix, entry.created)
        add_compare_create(request.compare, semaphore + b"g/" + entry.suffix, 0)
        value = encode({"at": time.time()})
        add_put(request.success, semaphore + b"g/" + entry.suffix, value, self._keys.lease_id)
        reply = await self._sender.send(request)
        return int(reply.header.revision) if reply.succeeded else 0
