"""Waiting on etcd: for admission, then commit the grant; timeouts; withdrawing.

1. **Wait** on this client's feed of the semaphore (:mod:`._feed`: one watch per
   semaphore per client, its state moved by the watch's events, waking a waiter
   only when its request is granted, gone, or its turn has come). When the
   session is lost the wait ends with its error (the etcd-io/etcd#19597 bug: a
   waiter whose session expired kept waiting).
2. **Admitted, and every admitted request ahead granted already?** (Grants, and so
   tokens, follow the queue: when a release admits several, each waits for the one
   ahead to commit; one whose client died holds those behind it up for at most its
   lease's TTL.) Then commit the grant: a Txn comparing the request key's
   create_revision (it still exists, so its lease is alive: a waiter whose lease
   expired is never told it holds, the Jepsen etcd 3.4.3 lock bug), the record's
   create_revision and ``seq``, that puts ``g/<sid>-<hold>`` on the lease. The
   token is that Txn's revision. Not the request key's: that one is taken at
   enqueue time, and a request that waited would carry a smaller token than a
   grant made while it waited.
3. **Timeouts** run on this client's monotonic clock: etcd has no timer to give a
   queued request (a per-request lease would be whole seconds, 2 at least). When
   it passes, the request is withdrawn with a Txn that compares "not granted yet";
   a grant that won the race stands and is returned. ``timeout=0`` enqueues,
   checks and withdraws at once (None: busy).
4. **Withdrawing** (when the session's rule says so: cancelled, unanswered): a
   new hold's keys are deleted, whatever they are (queued, granted, both
   variants), in one Txn; an upgrade's request is withdrawn unless it was
   granted, in which case it replaced the hold and its grant is returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Final

from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import (
    add_compare_create,
    add_delete,
    add_get_prefix,
    add_put,
    range_request,
)
from tenure.backends._base import Grant
from tenure.backends._ledger import Pending
from tenure.backends._store import SessionView
from tenure.backends.etcd._feed import Feeds
from tenure.backends.etcd._keys import encode, parse_suffix
from tenure.backends.etcd._queue import QueueEntry, SemState
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender
from tenure.errors import LeaseLostError, NotFoundError, TenureError, UnavailableError

__all__ = ["WITHDRAW_TRIES", "SingleWaiter", "until"]

#: Reads and withdrawals a withdrawal tries while grants race it (then it is sent
#: again, as an unanswered one is).
WITHDRAW_TRIES: Final = 5


class SingleWaiter:
    """Waits, grants and withdraws the single acquires of one session (module docstring);
    a lock_all's set is :class:`~tenure.backends.etcd._set_wait.SetWaiter`'s.

    Given the session's keys, its Txns, its record (why a request vanished), the
    channel to etcd (a read at a past revision) and the client's feeds; once bound, the
    session (its ledger: the hold a withdrawal keeps).
    """

    def __init__(
        self,
        keys: SessionKeys,
        sender: TxnSender,
        record: SessionRecord,
        conn: EtcdClient,
        feeds: Feeds,
    ) -> None:
        self._keys, self._sender, self._record, self._conn = keys, sender, record, conn
        self._feeds = feeds
        self._session: SessionView

    def bind(self, session: SessionView) -> None:
        """The session whose acquires these are (made after its parts: :meth:`EtcdStore.bind`)."""
        self._session = session

    async def wait(
        self,
        pending: Pending,
        state: SemState,
        suffix: bytes,
        old: QueueEntry | None,
    ) -> Grant | None:
        """Wait until request ``suffix`` is admitted and granted, times out, or ends.

        The semaphore's state comes from this client's feed of it (:mod:`._feed`): one
        watch, moved forward by its events, waking this waiter only when its request is
        granted, gone, or its turn has come. ``since`` is the oldest revision the feed
        must have reached for its state to be at least as new as what this waiter read.
        """
        name, timeout = pending.name, pending.timeout
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        _, hold, _ = parse_suffix(suffix)
        since = state.revision
        prefix = self._keys.prefix(name)
        with self._feeds.subscribe(prefix, state, suffix) as (feed, wake):
            while True:
                await until(wake, pending.future, deadline)
                if pending.future.done():  # the session ended: its future says how
                    return pending.future.result()
                wake.clear()
                if feed.failure is not None:
                    raise type(feed.failure)(*feed.failure.args)
                now = feed.state
                if now.revision >= since:
                    entry = now.entry(suffix)
                    if entry is None:
                        await self._vanished(pending, suffix, feed.deleted.get(suffix, 0))
                    assert entry is not None
                    if entry.granted:
                        return Grant(entry.granted, entry.count, None, hold)
                    if now.turn(suffix):
                        grant = await self._grant(pending, now, entry, old)
                        if isinstance(grant, Grant):
                            return grant
                        since = grant.revision  # what the failed grant read: wait for it
                        wake.set()
                        continue
                if deadline is not None and loop.time() >= deadline:
                    if await self.withdraw(name, suffix):
                        if timeout == 0:
                            return None
                        raise TimeoutError(f"acquire of {name!r} timed out after {timeout:g}s")
                    read = await self._sender.read(name)  # granted meanwhile: the grant stands
                    mine = read.entry(suffix)
                    if mine is not None and mine.granted:
                        return Grant(mine.granted, mine.count, None, hold)
                    since = read.revision
                    wake.set()

    async def _grant(
        self, pending: Pending, state: SemState, entry: QueueEntry, old: QueueEntry | None
    ) -> Grant | SemState:
        """Commit the grant of admitted request ``entry``, or the state to go on from."""
        name = pending.name
        prefix = self._keys.prefix(name)
        queue, grants = prefix + b"q/", prefix + b"g/"
        request = self._sender.new_txn()
        add_compare_create(request.compare, queue + entry.suffix, entry.created)
        add_compare_create(request.compare, prefix + b"rec", state.record)
        # Not granted yet: a Txn the etcd client sends again because its answer was lost
        # must not put the grant a second time (the token would then be the retry's
        # revision, not the grant key's create_revision).
        add_compare_create(request.compare, grants + entry.suffix, 0)
        # When it was granted, by this client's clock (etcd has none to offer).
        add_put(
            request.success, grants + entry.suffix, encode({"at": time.time()}), self._keys.lease_id
        )
        if old is not None:  # an upgrade replaces the hold: its old request and grant go
            add_delete(request.success, queue + old.suffix)
            add_delete(request.success, grants + old.suffix)
        add_get_prefix(request.failure, prefix)
        reply = await self._sender.send(request)
        if reply.succeeded:
            return Grant(int(reply.header.revision), entry.count, None, entry.hold)
        now = SemState.parse(
            name, prefix, reply.responses[1].response_range.kvs, int(reply.header.revision)
        )
        mine = now.entry(entry.suffix)
        if mine is not None and mine.granted and entry.sid == self._keys.lease_id:
            # Our first try was applied and its answer lost: the grant stands, and its
            # token is the revision that created it.
            return Grant(mine.granted, entry.count, None, entry.hold)
        if mine is None:
            await self._vanished(pending, entry.suffix, 0)
        if state.record and now.record != state.record:
            raise NotFoundError(f"semaphore {name!r} was deleted")
        return now

    async def _vanished(self, pending: Pending, suffix: bytes, gone_at: int) -> None:
        """Our request's key is gone and we did not delete it: the session, or a forced delete.

        A request that was admitted just before the delete (revision ``gone_at`` - 1) is
        as good as granted on the engine, which grants at once: it ends with
        LeaseLostError there, and here too, rather than NotFoundError.
        """
        name = pending.name
        await self._record.diagnose()
        if pending.future.done():  # the session ended: its future says how
            pending.future.result()
        message = f"semaphore {name!r} was deleted"
        admitted = False
        if gone_at:
            prefix = self._keys.prefix(name)
            with contextlib.suppress(TenureError):  # compacted already: say what we know
                reply = await self._conn.range(range_request(prefix, revision=gone_at - 1))
                admitted = SemState.parse(name, prefix, reply.kvs, gone_at - 1).is_admitted(suffix)
        if admitted:
            raise LeaseLostError(message)
        raise NotFoundError(message)

    async def withdraw(self, name: str, suffix: bytes) -> bool:
        """Delete request ``suffix`` unless it was granted; whether it was withdrawn."""
        prefix = self._keys.prefix(name)
        request = self._sender.new_txn()
        add_compare_create(request.compare, prefix + b"g/" + suffix, 0)
        add_delete(request.success, prefix + b"q/" + suffix)
        reply = await self._sender.send(request)
        return bool(reply.succeeded)

    async def withdraw_request(self, name: str, hold: int) -> Grant | None:
        """Withdraw hold ``hold``'s request (a new hold's, or an upgrade's), queued or
        never made; its grant if it was granted (it stays: the caller decides).

        The hold's own grant (the one the session holds) is not its request. Each
        request read as waiting is deleted under a compare of what was read (the same
        key, no grant key), so one granted meanwhile is read again, not deleted (a
        grant at once is made with its key, never later).
        """
        held = self._session.ledger.held.get((name, hold))
        kept = held.token if held is not None else 0
        prefix = self._keys.prefix(name)
        for _ in range(WITHDRAW_TRIES):
            state = await self._sender.read(name)
            raced = False
            for entry in state.entries:
                if entry.place != (self._keys.lease_id, hold) or (kept and entry.granted == kept):
                    continue
                if entry.granted:
                    return Grant(entry.granted, entry.count, None, hold)
                request = self._sender.new_txn()
                add_compare_create(request.compare, prefix + b"q/" + entry.suffix, entry.created)
                add_compare_create(request.compare, prefix + b"g/" + entry.suffix, 0)
                add_delete(request.success, prefix + b"q/" + entry.suffix)
                raced = raced or not (await self._sender.send(request)).succeeded
            if not raced:
                return None
        raise UnavailableError(
            f"the request of {name!r} kept changing while it was being withdrawn; sent again"
        )


async def until(wake: asyncio.Event, ended: asyncio.Future[Any], deadline: float | None) -> None:
    """Until ``wake`` is set or ``ended`` is done, or ``deadline`` (loop time) passes."""
    if wake.is_set() or ended.done():
        return
    loop = asyncio.get_running_loop()
    waiting = asyncio.ensure_future(wake.wait())
    try:
        timeout = None if deadline is None else max(0.0, deadline - loop.time())
        await asyncio.wait({waiting, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
