"""Acquire and restate on etcd: enqueue, wait for admission, commit the grant.

1. **Read** the semaphore (one Range, revision R) and check the request against it
   and the node's settings (count above the limit, a full queue, ``max_semaphores``
   for a new ephemeral one).
2. **Enqueue** with a Txn that compares the session's ``seq``, that the request key
   is new and that the record is the one read: put ``q/<sid>-<hold>`` (on the
   session's lease), and read the semaphore back in the same Txn (revision R2).
   When the queue was empty, the same Txn also puts the grant key, comparing that
   the queue is still empty: an uncontended acquire is one read and one Txn.
3. **Admitted, and every admitted request ahead granted already?** (Grants, and so
   tokens, follow the queue: when a release admits several, each waits for the one
   ahead to commit; one whose client died holds those behind it up for at most its
   lease's TTL.) Then commit the grant: a Txn
   comparing the request key's create_revision (it still exists, so its lease is
   alive: a waiter whose lease expired is never told it holds, the Jepsen etcd
   3.4.3 lock bug), the record's create_revision and ``seq``, that puts
   ``g/<sid>-<hold>`` on the lease. **The fencing token is that Txn's revision**
   (the grant key's create_revision): global to the cluster, persisted, and
   greater than every earlier grant's. Not the request key's: that one is taken
   at enqueue time, and a request that waited would carry a smaller token than a
   grant made while it waited.
4. **Wait** (not admitted): watch the semaphore's range from R2 + 1 and read it
   again when a change *ahead* of the request arrives (a request behind it cannot
   change its admission). A watch cut by compaction reads afresh and watches from
   the new revision. When the session is lost the wait ends with its error (the
   etcd-io/etcd#19597 bug: a waiter whose session expired kept waiting).
5. **Timeouts** run on this client's monotonic clock: etcd has no timer to give a
   queued request (a per-request lease would be whole seconds, 2 at least). When
   it passes, the request is withdrawn with a Txn that compares "not granted yet";
   a grant that won the race stands and is returned. ``timeout=0`` enqueues,
   checks and withdraws at once (None: busy).
6. **Cancelled** while waiting: the request is withdrawn the same way, and a
   grant that raced the cancellation is released, so nothing is left behind.

**Restate**: no more tokens (or new data) rewrites the request key in place (a
put keeps its create_revision and the grant key is untouched: same place, same
token). More tokens enqueue a second request for the hold (the key marked ``+``,
or unmarked if the hold's current one is marked): when admitted, its grant Txn
also deletes the hold's old request and grant, so it replaces the hold with a new
token; if it times out or is cancelled, only the new request goes.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from tenure._core.values import MAX_COUNT, check_data
from tenure.backends._base import Grant
from tenure.backends.etcd._feed import subscribe
from tenure.backends.etcd._keys import (
    compare_create,
    compare_created_before,
    compare_mod,
    delete,
    encode,
    entry_suffix,
    get,
    get_prefix,
    parse_suffix,
    put,
    range_request,
    txn,
)
from tenure.backends.etcd._queue import Entry, SemState
from tenure.errors import LeaseLostError, LimitExceededError, NotFoundError, TenureError

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession

__all__ = ["request"]

_DELETE = 1  # mvccpb.Event.DELETE


async def request(
    s: EtcdSession,
    name: str,
    hold: int,
    count: int,
    data: bytes,
    timeout: float | None,
    ephemeral: bool,
) -> Grant | None:
    """Acquire (or restate) hold ``hold`` of ``name``; see the module docstring."""
    place = (name, hold)
    s.busy.add(place)
    joining = s.joining.get(name)
    if joining is None:
        joining = s.joining[name] = asyncio.Lock()
    try:
        async with joining:
            found = await _join(s, name, hold, count, data, timeout, ephemeral)
        if not isinstance(found, tuple):
            return found
        state, suffix, old = found
        return await _wait(s, name, state, suffix, old, timeout)
    finally:
        s.busy.discard(place)
        if not joining.locked() and s.joining.get(name) is joining:
            del s.joining[name]


async def _join(
    s: EtcdSession,
    name: str,
    hold: int,
    count: int,
    data: bytes,
    timeout: float | None,
    ephemeral: bool,
) -> Grant | tuple[SemState, bytes, Entry | None] | None:
    """Check and enqueue (granting at once when it fits): a grant, or what to wait for."""
    place = (name, hold)
    backend = s.backend
    prefix = s.layout.semaphore(s.node, name)
    queue, grants, record = prefix + b"q/", prefix + b"g/", prefix + b"rec"
    config_key = s.layout.config(s.node)
    known = backend.records.get((s.node, name))
    if place in s.held or (known is None and not ephemeral):
        state = await s.read(name)
    else:  # a guess (revision 0): the Txn compares it, and its failure reads the truth
        state = SemState(name, 0, *(known or (0, MAX_COUNT)))
    fresh = False  # the settings were read for this acquire (not the view's)
    while True:
        config = s.view.config
        try:
            data = check_data("owner data", data, config.max_data_size)
        except LimitExceededError:
            if fresh:
                raise
            await s.config()  # the view may lag a change: refuse on the settings now
            fresh = True
            continue
        value = encode({"count": count, "data": data})
        guess = state.revision == 0
        old = None
        if guess:
            if count > state.limit:
                state = await s.read(name)
                continue
        else:
            backend.remember(s.node, state)
            if not state.exists and not ephemeral:
                raise NotFoundError(
                    f"semaphore {name!r} does not exist (create it or use ephemeral)"
                )
            if state.exists and count > state.limit:
                raise LimitExceededError(
                    f"count {count} exceeds the limit {state.limit} of {name!r}"
                )
            old = state.held((s.lease_id, hold)) if place in s.held else None
            if old is not None and count <= old.count:
                # Restate in place: same key (a put keeps its create_revision), same grant.
                key = queue + old.suffix
                reply = await s.txn(
                    [compare_create(key, old.created)], [put(key, value, s.lease_id)], []
                )
                if reply.succeeded:
                    s.held[place].count = count
                    return Grant(old.granted, count, None, hold)
                state = await s.read(name)
                continue
        suffix = entry_suffix(s.lease_id, hold, old is not None and not old.upgrade)
        existing = None if guess else state.entry(suffix)
        if existing is not None:  # an enqueue of ours whose answer was lost: resume it
            return state, existing.suffix, old
        if timeout != 0 and len(state.waiters()) >= config.max_waiters:
            if not fresh:
                await s.config()
                fresh = True
                continue
            raise _too_many_waiters(config.max_waiters, name)
        creating = not state.exists
        # Both Txns compare the session's seq (s.txn adds it to the outer one, and
        # ``fence`` is the same compare for the nested one), the settings read and the
        # record; then ``enqueue`` puts the request and reads the semaphore back.
        compares = [
            compare_mod(config_key, s.view.config_rev),
            compare_create(record, state.record),
        ]

        if state.fits_at_tail(count):
            # Granted at once if nobody joined since the state read (or, for a guess,
            # nobody is queued at all), in the same Txn as the request: one round trip.
            # Else, where this client has seen a queue (a state read, or the name's
            # last acquire), the nested Txn enqueues: still one round trip; a guess
            # about a name not known to be contended reads instead (a nested Txn
            # costs every uncontended acquire its bytes, in the Raft log too).
            success = [
                put(queue + suffix, value, s.lease_id),
                put(grants + suffix, b"", s.lease_id),
            ]
            nest = not guess or backend.is_contended(s.node, name)
            if nest:
                nested_compares, nested_success, nested_failure = _enqueue(
                    s, prefix, suffix, value, compares
                )
                failure = [txn([s.fence(), *nested_compares], nested_success, nested_failure)]
            else:
                failure = [get(config_key), get_prefix(prefix)]
            reply = await s.txn(
                [*compares, compare_created_before(queue, state.revision + 1)], success, failure
            )
            revision = int(reply.header.revision)
            if reply.succeeded:
                if guess:
                    backend.contended(s.node, name, False)
                if creating:
                    await _check_semaphores(s, name, hold, revision)
                return _granted(s, name, hold, suffix, revision, count)
            if nest:
                outcome = reply.responses[1].response_txn
                read = list(outcome.responses)
            else:
                outcome, read = reply, list(reply.responses)[1:]  # s.txn's read first
        else:
            outcome = await s.txn(*_enqueue(s, prefix, suffix, value, compares))
            revision = int(outcome.header.revision)
            read = list(outcome.responses)[0 if outcome.succeeded else 1 :]  # s.txn's read first
        if not outcome.succeeded:  # raced with a change: the settings and the state, read
            config_kvs = read[0].response_range.kvs
            if not config_kvs:
                await s.diagnose()
                s.check_alive()
                raise NotFoundError(f"node {s.node!r} does not exist")
            s.view.update(config_kvs[0])
            state = SemState.parse(name, prefix, read[1].response_range.kvs, revision)
            backend.contended(s.node, name, bool(state.entries))
            continue
        state = SemState.parse(name, prefix, read[1].response_range.kvs, revision)
        backend.contended(s.node, name, True)
        mine = state.entry(suffix)
        if mine is not None and timeout != 0 and not mine.granted:
            ahead = [e for e in state.waiters() if e.created < mine.created]
            if len(ahead) >= config.max_waiters:  # others joined meanwhile: withdraw
                await _withdraw(s, name, suffix)
                raise _too_many_waiters(config.max_waiters, name)
        return state, suffix, old


def _enqueue(
    s: EtcdSession, prefix: bytes, suffix: bytes, value: bytes, compares: list[Any]
) -> tuple[list[Any], list[Any], list[Any]]:
    """The enqueue Txn: put the request and read the semaphore back (failing: the
    node's settings and the semaphore, read)."""
    key = prefix + b"q/" + suffix
    return (
        [*compares, compare_create(key, 0)],
        [put(key, value, s.lease_id), get_prefix(prefix)],
        [get(s.layout.config(s.node)), get_prefix(prefix)],
    )


def _too_many_waiters(limit: int, name: str) -> LimitExceededError:
    return LimitExceededError(f"max_waiters ({limit}) reached on semaphore {name!r}")


async def _check_semaphores(s: EtcdSession, name: str, hold: int, revision: int) -> None:
    """After creating ``name`` at ``revision``: undo it if the node has too many semaphores.

    Counted only when the view's bound (:meth:`NodeView.semaphores_bound`) does not
    prove the limit kept. Two creators racing past the limit both undo: never one
    too many.
    """
    limit = s.view.config.max_semaphores
    bound = s.view.semaphores_bound(revision)
    if bound is not None and bound <= limit:
        return
    if await s.count_semaphores() <= limit:
        return
    await s.drop_hold(name, hold)
    raise LimitExceededError(f"max_semaphores ({limit}) reached on node {s.node!r}")


def _granted(s: EtcdSession, name: str, hold: int, suffix: bytes, token: int, count: int) -> Grant:
    from tenure.backends.etcd._session import Held

    s.held[name, hold] = Held(suffix, token, count)
    return Grant(token, count, None, hold)


async def _wait(
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
                now = feed.state
                if now.revision >= since:
                    entry = now.entry(suffix)
                    if entry is None:
                        await _vanished(s, name, suffix, feed.deleted.get(suffix, 0))
                    assert entry is not None
                    if entry.granted:
                        return _granted(s, name, hold, suffix, entry.granted, entry.count)
                    if now.turn(suffix):
                        grant = await _grant(s, name, now, entry, old)
                        if isinstance(grant, Grant):
                            return grant
                        since = grant.revision  # what the failed grant read: wait for it
                        wake.set()
                        continue
                if deadline is not None and loop.time() >= deadline:
                    if await _withdraw(s, name, suffix):
                        if timeout == 0:
                            return None
                        raise TimeoutError(f"acquire of {name!r} timed out after {timeout:g}s")
                    read = await s.read(name)  # granted meanwhile: the grant stands
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
    layout = s.layout
    prefix = layout.semaphore(s.node, name)
    queue, grants = layout.queue(s.node, name), layout.grants(s.node, name)
    success = [put(grants + entry.suffix, b"", s.lease_id)]
    if old is not None:  # an upgrade replaces the hold: its old request and grant go
        success += [delete(queue + old.suffix), delete(grants + old.suffix)]
    reply = await s.txn(
        [
            compare_create(queue + entry.suffix, entry.created),
            compare_create(layout.record(s.node, name), state.record),
            # Not granted yet: a Txn the connection sends again because its answer
            # was lost must not put the grant a second time (the token would then
            # be the retry's revision, not the grant key's create_revision).
            compare_create(grants + entry.suffix, 0),
        ],
        success,
        [get_prefix(prefix)],
    )
    if reply.succeeded:
        return _granted(s, name, entry.hold, entry.suffix, int(reply.header.revision), entry.count)
    now = SemState.parse(
        name, prefix, reply.responses[1].response_range.kvs, int(reply.header.revision)
    )
    mine = now.entry(entry.suffix)
    if mine is not None and mine.granted and entry.sid == s.lease_id:
        # Our first try was applied and its answer lost: the grant stands, and its
        # token is the revision that created it.
        return _granted(s, name, entry.hold, entry.suffix, mine.granted, entry.count)
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


async def _withdraw(s: EtcdSession, name: str, suffix: bytes) -> bool:
    """Delete request ``suffix`` unless it was granted; whether it was withdrawn."""
    queue, grants = s.layout.queue(s.node, name), s.layout.grants(s.node, name)
    reply = await s.txn([compare_create(grants + suffix, 0)], [delete(queue + suffix)], [])
    return bool(reply.succeeded)


async def _give_up(s: EtcdSession, name: str, suffix: bytes, hold: int, old: Entry | None) -> None:
    """The asker was cancelled: withdraw, or undo a grant that raced the cancellation."""
    try:
        if await _withdraw(s, name, suffix):
            return
        if old is None:
            await s.drop_hold(name, hold)
        else:  # an upgrade that won the race replaced the hold: keep it, as granted
            state = await s.read(name)
            entry = state.entry(suffix)
            if entry is not None and entry.granted:
                _granted(s, name, hold, suffix, entry.granted, entry.count)
    except Exception:  # the caller is cancelled, and that is what it must see
        return
