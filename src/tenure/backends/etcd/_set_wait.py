"""A lock_all on etcd after it joined: waiting in every queue, the grants, withdrawing.

What :mod:`._set` made: one request per name, ``q/<sid>-<hold>`` in each name's
queue, all with one create_revision ``C`` (the set's arrival) and ``grp``
(its size; the JSON key is the set's old name, kept for the keys written with it).

1. **Wait** on this client's feed of every member's semaphore (:mod:`._feed`, one
   wake event for the members), until each member may commit in its queue
   (:meth:`SemState.turn`: admitted, everything ahead granted). Being the set's
   own admission, that is stable while the member keys exist (:mod:`._queue`).
2. **Commit**: one Txn that compares every member key's create_revision (each is
   there, so each is still admitted) and puts the first member's grant key. From
   then on the set is granted, as the engine grants it, at once: nobody else
   can be admitted past a member that waits, and a member whose key is there stays
   admitted.
3. **The other grants**, one Txn each, in the names' order: each its own revision,
   so each member its own fencing token, ascending in the names' order, as the
   engine's (one Txn would give every member the same revision). Each compares its
   own key and that its grant key is not there yet (a Txn sent again after its
   answer was lost must not put it twice); **the last compares every member key**,
   so when it answers the whole set is held: a grant lost before that (a forced
   delete, while the grants were being put) is found there, not missed by the
   session (which learns of losses only for what the caller holds). Such a loss
   ends the set as on the engine (granted, then lost: LeaseLostError, the others
   released).
4. **A member key deleted under the wait** (a forced delete of its semaphore) ends
   the set: the others are withdrawn, and every member fails with NotFoundError,
   or LeaseLostError if every member was admitted just before the delete (the
   engine would have granted the set by then), as a single acquire decides
   (:meth:`._wait.Waiter._vanished`). The session's end ends the wait with its
   error (every key goes with the lease).
5. **Timeouts** run on the client's monotonic clock; a timeout withdraws the set
   (one Txn deleting every member key not granted, comparing that none is) unless
   it was committed, which stands. **Withdrawing** for the session (cancelled,
   unanswered) is one Txn too, shared by the members' withdrawals: a member
   granted meanwhile is given back to the session, which releases it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import (
    add_compare_create,
    add_delete,
    add_get_prefix,
    add_put,
    get_prefix,
    range_request,
)
from tenure.backends._base import Grant
from tenure.backends._ledger import Pending
from tenure.backends._store import Withdrawal
from tenure.backends.etcd._feed import Feeds
from tenure.backends.etcd._holds import Holds
from tenure.backends.etcd._keys import encode
from tenure.backends.etcd._lock_set import MAX_TXN_OPS, AllOrNoneSet, parse_states
from tenure.backends.etcd._queue import QueueEntry, SemState
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender
from tenure.backends.etcd._wait import WITHDRAW_TRIES, until
from tenure.errors import LeaseLostError, NotFoundError, TenureError, UnavailableError

__all__ = ["SetWaiter"]

#: Members whose keys one Txn deletes when a set is given up (three keys each).
MEMBERS_PER_DROP: Final = MAX_TXN_OPS // 3


class SetWaiter:
    """Waits, grants and withdraws the lock_all sets of one session (module docstring).

    Given the session's keys, its Txns, its record (why a member vanished), the channel
    to etcd (reads of every member), the client's feeds and the session's
    :class:`Holds` (a member granted to a set that failed is dropped).
    """

    def __init__(
        self,
        keys: SessionKeys,
        sender: TxnSender,
        record: SessionRecord,
        conn: EtcdClient,
        feeds: Feeds,
        holds: Holds,
    ) -> None:
        self._keys, self._sender, self._record, self._conn = keys, sender, record, conn
        self._feeds, self._holds = feeds, holds

    async def await_grant(self, pending: Pending) -> Grant | None:
        """Member ``pending``'s grant: the first member's call waits for the whole set
        (one wait is every member's), the others read what it ended with."""
        lock_set = pending.state
        assert isinstance(lock_set, AllOrNoneSet)
        if not lock_set.waited:
            try:
                got = await self._wait(lock_set)
            except (TenureError, TimeoutError) as error:
                lock_set.outcome, lock_set.waited = error, True
                raise
            lock_set.outcome, lock_set.waited = got, True
        outcome = lock_set.outcome
        if isinstance(outcome, BaseException):
            raise outcome
        return None if outcome is None else outcome[lock_set.index(pending)]

    async def _wait(self, lock_set: AllOrNoneSet) -> list[Grant] | None:
        """Wait until every member may commit, then grant them (module docstring)."""
        first = lock_set.pendings[0]
        timeout = first.timeout
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        since, wake = lock_set.since, asyncio.Event()
        with contextlib.ExitStack() as stack:
            feeds = [
                stack.enter_context(self._feeds.subscribe(prefix, state, suffix, wake))[0]
                for prefix, state, suffix in zip(
                    lock_set.prefixes, lock_set.states, lock_set.suffixes, strict=True
                )
            ]
            while True:
                await until(wake, first.future, deadline)
                if first.future.done():  # the session ended: its future says how
                    raise _ended(first)
                wake.clear()
                for feed in feeds:
                    if feed.failure is not None:
                        raise type(feed.failure)(*feed.failure.args)
                if all(feed.state.revision >= since for feed in feeds):
                    found = [
                        feed.state.entry(suffix)
                        for feed, suffix in zip(feeds, lock_set.suffixes, strict=True)
                    ]
                    entries = [entry for entry in found if entry is not None]
                    if len(entries) < len(found):
                        gone = found.index(None)
                        await self._vanished(
                            lock_set, gone, feeds[gone].deleted.get(lock_set.suffixes[gone], 0)
                        )
                    if entries[0].granted:  # committed by a Txn whose answer was lost
                        return await self.finish(lock_set, _leading(lock_set, entries))
                    if all(
                        feed.state.turn(suffix)
                        for feed, suffix in zip(feeds, lock_set.suffixes, strict=True)
                    ):
                        committed = await self._commit(lock_set)
                        if isinstance(committed, list):
                            return committed
                        since = committed  # what the failed commit read: wait for it
                        wake.set()
                        continue
                if deadline is not None and loop.time() >= deadline:
                    withdrawn = await self.withdraw_all(lock_set, keep_committed=True)
                    if not any(withdrawn):
                        if timeout == 0:
                            return None
                        names = ", ".join(map(repr, lock_set.names))
                        raise TimeoutError(f"lock_all of {names} timed out after {timeout:g}s")
                    taken = [grant for grant in withdrawn if grant is not None]
                    return await self.finish(lock_set, taken)  # committed meanwhile: it stands

    async def _commit(self, lock_set: AllOrNoneSet) -> list[Grant] | int:
        """The Txn that grants the first member, comparing every member key: then the
        others' grants (:meth:`finish`); or the revision the failed Txn read."""
        n = len(lock_set.pendings)
        request = self._sender.new_txn()
        for i in range(n):
            add_compare_create(request.compare, lock_set.request(i), lock_set.created)
        add_compare_create(request.compare, lock_set.grant_key(0), 0)
        add_put(request.success, lock_set.grant_key(0), _granted_value(), self._keys.lease_id)
        for prefix in lock_set.prefixes:
            add_get_prefix(request.failure, prefix)
        reply = await self._sender.send(request)
        revision = int(reply.header.revision)
        if reply.succeeded:
            return await self.finish(lock_set, [lock_set.grant(0, revision)])
        states = parse_states(lock_set, list(reply.responses)[1:], revision)
        mine = states[0].entry(lock_set.suffixes[0])
        if mine is not None and mine.granted:  # our first try was applied, its answer lost
            return await self.finish(lock_set, [lock_set.grant(0, mine.granted)])
        return revision  # a member key went: the feeds tell which, and when

    async def finish(self, lock_set: AllOrNoneSet, grants: list[Grant]) -> list[Grant]:
        """Put the grant keys of the members after the ``grants`` made, one Txn each in
        the names' order, the last comparing every member key (module docstring)."""
        n = len(lock_set.pendings)
        while len(grants) < n:
            i = len(grants)
            compared = range(n) if i == n - 1 else [i]
            request = self._sender.new_txn()
            for j in compared:
                add_compare_create(request.compare, lock_set.request(j), lock_set.created)
                add_get_prefix(request.failure, lock_set.prefixes[j])
            add_compare_create(request.compare, lock_set.grant_key(i), 0)
            add_put(request.success, lock_set.grant_key(i), _granted_value(), self._keys.lease_id)
            reply = await self._sender.send(request)
            revision = int(reply.header.revision)
            if reply.succeeded:
                grants.append(lock_set.grant(i, revision))
                continue
            read = list(reply.responses)[1:]
            states = {
                j: SemState.parse(
                    lock_set.names[j], lock_set.prefixes[j], read[k].response_range.kvs, revision
                )
                for k, j in enumerate(compared)
            }
            mine = states[i].entry(lock_set.suffixes[i])
            if mine is not None and mine.granted:  # applied, its answer lost
                grants.append(lock_set.grant(i, mine.granted))
                continue
            gone = next(j for j in compared if states[j].entry(lock_set.suffixes[j]) is None)
            await self._lost(lock_set, lock_set.names[gone])
        return grants

    async def _lost(self, lock_set: AllOrNoneSet, name: str) -> None:
        """The set was granted (committed) and member ``name`` is gone before all its
        grants were put: it ends as the engine's would, granted and then lost."""
        await self._record.ensure_alive()  # the session's end is told as that
        await self.abandon(lock_set)
        raise LeaseLostError(f"semaphore {name!r} was deleted")

    async def _vanished(self, lock_set: AllOrNoneSet, gone: int, gone_at: int) -> None:
        """Member ``gone``'s key was deleted (at revision ``gone_at``, 0 if unknown), not
        by us: the others leave, and every member fails (module docstring)."""
        first = lock_set.pendings[0]
        await self._record.diagnose()
        if first.future.done():  # the session ended: its future says how
            raise _ended(first)
        admitted = False
        if gone_at:
            with contextlib.suppress(TenureError):  # compacted already: say what we know
                replies = await asyncio.gather(
                    *(
                        self._conn.range(range_request(prefix, revision=gone_at - 1))
                        for prefix in lock_set.prefixes
                    )
                )
                admitted = all(
                    SemState.parse(name, prefix, reply.kvs, gone_at - 1).is_admitted(suffix)
                    for name, prefix, suffix, reply in zip(
                        lock_set.names, lock_set.prefixes, lock_set.suffixes, replies, strict=True
                    )
                )
        withdrawn = await self.withdraw_all(lock_set)
        for pending, grant in zip(lock_set.pendings, withdrawn, strict=True):
            if grant is not None:  # (none should be: we commit, and had not)
                await self._holds.drop(pending.name, pending.hold)
        message = f"semaphore {lock_set.names[gone]!r} was deleted"
        if admitted:
            raise LeaseLostError(message)
        raise NotFoundError(message)

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        """Member ``pending``'s withdrawal for the session: one for the whole set, which
        every member's shares; its grant if the set was granted (the session releases it)."""
        lock_set = pending.state
        assert isinstance(lock_set, AllOrNoneSet)
        task = lock_set.withdrawal
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = lock_set.withdrawal = asyncio.ensure_future(self.withdraw_all(lock_set))
        grant = (await asyncio.shield(task))[lock_set.index(pending)]
        return Withdrawal.WITHDRAWN if grant is None else grant

    async def withdraw_all(
        self, lock_set: AllOrNoneSet, *, keep_committed: bool = False
    ) -> list[Grant | None]:
        """Delete every member key not granted, and the placeholders, in one Txn that
        compares that none of those was granted meanwhile; each member's grant, or None.

        ``keep_committed``: if a member is granted (the set was committed), delete
        nothing: the set stands.
        """
        n = len(lock_set.pendings)
        for _ in range(WITHDRAW_TRIES):
            states = await self.read(lock_set)
            entries = [
                state.entry(suffix) for state, suffix in zip(states, lock_set.suffixes, strict=True)
            ]
            found = [
                None if entry is None or not entry.granted else lock_set.grant(i, entry.granted)
                for i, entry in enumerate(entries)
            ]
            if keep_committed and any(found):
                return found
            request = self._sender.new_txn()
            for i, entry in enumerate(entries):
                if entry is not None and not entry.granted:
                    add_compare_create(request.compare, lock_set.grant_key(i), 0)
                    add_delete(request.success, lock_set.request(i))
            for i in range(n):  # (any of them may be there: an answer may have been lost)
                add_delete(request.success, lock_set.placeholder(i))
            if (await self._sender.send(request)).succeeded:
                lock_set.placed.clear()
                return found
        names = ", ".join(map(repr, lock_set.names))
        raise UnavailableError(
            f"the lock_all of {names} kept changing while it was being withdrawn; sent again"
        )

    async def abandon(self, lock_set: AllOrNoneSet) -> None:
        """Delete every key of the set: requests, grants, placeholders (a set refused
        after it joined, or granted and then lost); a few Txns for a large set."""
        n = len(lock_set.pendings)
        for start in range(0, n, MEMBERS_PER_DROP):
            request = self._sender.new_txn()
            for i in range(start, min(n, start + MEMBERS_PER_DROP)):
                add_delete(request.success, lock_set.request(i))
                add_delete(request.success, lock_set.grant_key(i))
                add_delete(request.success, lock_set.placeholder(i))
            await self._sender.send(request)
        lock_set.placed.clear()

    async def read(self, lock_set: AllOrNoneSet) -> list[SemState]:
        """Every member's semaphore, read now (one Txn)."""
        reply = await self._conn.txn([], [get_prefix(prefix) for prefix in lock_set.prefixes])
        return parse_states(lock_set, list(reply.responses), int(reply.header.revision))


def _leading(lock_set: AllOrNoneSet, entries: list[QueueEntry]) -> list[Grant]:
    """The grants of the members granted already, from the first on (in order)."""
    grants = []
    for i, entry in enumerate(entries):
        if not entry.granted:
            break
        grants.append(lock_set.grant(i, entry.granted))
    return grants


def _granted_value() -> bytes:
    """A grant key's value: when it was granted, by this client's clock."""
    return encode({"at": time.time()})


def _ended(pending: Pending) -> BaseException:
    """Why the session's end ended ``pending`` (its future holds the error)."""
    error = pending.future.exception()
    assert error is not None  # (the session's end fails every pending acquire)
    return error
