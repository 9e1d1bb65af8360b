"""Waiting on etcd: for admission, then commit the grant; timeouts; cancellation.

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
4. **Cancelled** while waiting: the request is withdrawn the same way, and a
   grant that raced the cancellation is released, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from tenure.backends._base import Grant
from tenure.backends.etcd._feed import subscribe
from tenure.backends.etcd._keys import (
    add_compare_create,
    add_delete,
    add_get_prefix,
    add_put,
    encode,
    parse_suffix,
    range_request,
)
from tenure.backends.etcd._queue import Entry, Held, SemState
from tenure.errors import LeaseLostError, NotFoundError, TenureError

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession

__all__ = ["granted", "wait", "withdraw"]


def granted(s: EtcdSession, name: str, hold: int, suffix: bytes, token: int, count: int) -> Grant:
    s.held[name, hold] = Held(suffix, token, count)
    return Grant(token, count, None, hold)


async def wait(
    s: EtcdSession,
    name: str,
    state: SemState,
    suffix: bytes,
    old: Entry | None,
    timeout: float | None,
) -> Grant | None:
    """Wait until request ``suffix`` is admitted and granted, times out, or ends.

    The semaphore's state comes from this client's feed of it (:mod:`._feed`): one
    watch, moved forward by its events, waking this waiter only when its request is
    granted, gone, or its turn has come. ``since`` is the oldest revision the feed
    must have reached for its state to be at least as new as what this waiter read.
    """
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    _, hold, _ = parse_suffix(suffix)
    since = state.revision
    try:
        with subscribe(s, state, suffix) as (feed, wake):
            while True:
                await _until(wake.wait(), s.lost.wait(), deadline)
                if s.ended is not None:
                    raise s.wait_failure() from None
                wake.clear()
                if feed.failure is not None:
                    raise type(feed.failure)(*feed.failure.args)
                now = feed.state
                if now.revision >= since:
                    entry = now.entry(suffix)
                    if entry is None:
                        await _vanished(s, name, suffix, feed.deleted.get(suffix, 0))
                    assert entry is not None
                    if entry.granted:
                        return granted(s, name, hold, suffix, entry.granted, entry.count)
                    if now.turn(suffix):
                        grant = await _grant(s, name, now, entry, old)
                        if isinstance(grant, Grant):
                            return grant
                        since = grant.revision  # what the failed grant read: wait for it
                        wake.set()
                        continue
                if deadline is not None and loop.time() >= deadline:
                    if await withdraw(s, name, suffix):
                        if timeout == 0:
                            return None
                        raise TimeoutError(f"acquire of {name!r} timed out after {timeout:g}s")
                    read = await s.read(name)  # granted meanwhile: the grant stands
                    mine = read.entry(suffix)
                    if mine is not None and mine.granted:
                        return granted(s, name, hold, suffix, mine.granted, mine.count)
                    since = read.revision
                    wake.set()
    except asyncio.CancelledError:
        if s.ended is None:
            await asyncio.shield(_give_up(s, name, suffix, hold, old))
        raise


async def _until(first: Any, second: Any, deadline: float | None) -> None:
    """Until either awaitable is done, or ``deadline`` (loop time) passes."""
    tasks = {asyncio.ensure_future(first), asyncio.ensure_future(second)}
    try:
        timeout = (
            None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        )
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def _grant(
    s: EtcdSession, name: str, state: SemState, entry: Entry, old: Entry | None
) -> Grant | SemState:
    """Commit the grant of admitted request ``entry``, or the state to go on from."""
    prefix = s.layout.semaphore(s.node, name)
    queue, grants = prefix + b"q/", prefix + b"g/"
    request = s.new_txn()
    add_compare_create(request.compare, queue + entry.suffix, entry.created)
    add_compare_create(request.compare, prefix + b"rec", state.record)
    # Not granted yet: a Txn the connection sends again because its answer was lost
    # must not put the grant a second time (the token would then be the retry's
    # revision, not the grant key's create_revision).
    add_compare_create(request.compare, grants + entry.suffix, 0)
    # When it was granted, by this client's clock (etcd has none to offer).
    add_put(request.success, grants + entry.suffix, encode({"at": time.time()}), s.lease_id)
    if old is not None:  # an upgrade replaces the hold: its old request and grant go
        add_delete(request.success, queue + old.suffix)
        add_delete(request.success, grants + old.suffix)
    add_get_prefix(request.failure, prefix)
    reply = await s.send(request)
    if reply.succeeded:
        return granted(s, name, entry.hold, entry.suffix, int(reply.header.revision), entry.count)
    now = SemState.parse(
        name, prefix, reply.responses[1].response_range.kvs, int(reply.header.revision)
    )
    mine = now.entry(entry.suffix)
    if mine is not None and mine.granted and entry.sid == s.lease_id:
        # Our first try was applied and its answer lost: the grant stands, and its
        # token is the revision that created it.
        return granted(s, name, entry.hold, entry.suffix, mine.granted, entry.count)
    if mine is None:
        await _vanished(s, name, entry.suffix, 0)
    if state.record and now.record != state.record:
        raise NotFoundError(f"semaphore {name!r} was deleted")
    return now


async def _vanished(s: EtcdSession, name: str, suffix: bytes, gone_at: int) -> None:
    """Our request's key is gone and we did not delete it: the session, or a forced delete.

    A request that was admitted just before the delete (revision ``gone_at`` - 1) is
    as good as granted on the engine, which grants at once: it ends with
    LeaseLostError there, and here too, rather than NotFoundError.
    """
    await s.diagnose()
    if s.ended is not None:
        raise s.wait_failure()
    message = f"semaphore {name!r} was deleted"
    admitted = False
    if gone_at:
        prefix = s.layout.semaphore(s.node, name)
        with contextlib.suppress(TenureError):  # compacted already: say what we know
            reply = await s.conn.range(range_request(prefix, revision=gone_at - 1))
            admitted = SemState.parse(name, prefix, reply.kvs, gone_at - 1).is_admitted(suffix)
    if admitted:
        raise LeaseLostError(message)
    raise NotFoundError(message)


async def withdraw(s: EtcdSession, name: str, suffix: bytes) -> bool:
    """Delete request ``suffix`` unless it was granted; whether it was withdrawn."""
    prefix = s.layout.semaphore(s.node, name)
    request = s.new_txn()
    add_compare_create(request.compare, prefix + b"g/" + suffix, 0)
    add_delete(request.success, prefix + b"q/" + suffix)
    reply = await s.send(request)
    return bool(reply.succeeded)


async def _give_up(s: EtcdSession, name: str, suffix: bytes, hold: int, old: Entry | None) -> None:
    """The asker was cancelled: withdraw, or undo a grant that raced the cancellation."""
    try:
        if await withdraw(s, name, suffix):
            return
        if old is None:
            await s.drop_hold(name, hold)
        else:  # an upgrade that won the race replaced the hold: keep it, as granted
            state = await s.read(name)
            entry = state.entry(suffix)
            if entry is not None and entry.granted:
                granted(s, name, hold, suffix, entry.granted, entry.count)
    except Exception:  # the caller is cancelled, and that is what it must see
        return
