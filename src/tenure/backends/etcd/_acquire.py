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

from tenure._core.values import check_data
from tenure.backends._base import Grant
from tenure.backends.etcd._keys import (
    compare_create,
    compare_empty,
    delete,
    encode,
    entry_suffix,
    get,
    get_prefix,
    put,
    range_request,
)
from tenure.backends.etcd._queue import Entry, SemState
from tenure.errors import LeaseLostError, LimitExceededError, NotFoundError, TenureError

if TYPE_CHECKING:
    from tenure.backends.etcd._session import EtcdSession
    from tenure.backends.etcd._streams import Watcher

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
    joining = s.joining.setdefault(name, asyncio.Lock())
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
    """Read, check and enqueue: a grant (or restate) at once, or what to wait for."""
    place = (name, hold)
    config = await s.config()
    data = check_data("owner data", data, config.max_data_size)
    layout = s.layout
    prefix, queue = layout.semaphore(s.node, name), layout.queue(s.node, name)
    record, grants = layout.record(s.node, name), layout.grants(s.node, name)
    value = encode({"count": count, "data": data})
    while True:
        state = await s.read(name)
        if not state.exists and not ephemeral:
            raise NotFoundError(f"semaphore {name!r} does not exist (create it or use ephemeral)")
        if state.exists and count > state.limit:
            raise LimitExceededError(f"count {count} exceeds the limit {state.limit} of {name!r}")
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
            continue
        suffix = entry_suffix(s.lease_id, hold, old is not None and not old.upgrade)
        existing = state.entry(suffix)
        if existing is not None:  # an enqueue of ours whose answer was lost: resume it
            return state, existing.suffix, old
        waiting = state.waiters()
        if not state.exists and await s.count_semaphores() >= config.max_semaphores:
            raise LimitExceededError(
                f"max_semaphores ({config.max_semaphores}) reached on node {s.node!r}"
            )
        if timeout != 0 and waiting and len(waiting) >= config.max_waiters:
            raise LimitExceededError(
                f"max_waiters ({config.max_waiters}) reached on semaphore {name!r}"
            )
        fast = not state.entries  # nobody queued or holds: grant in the same Txn
        compares = [compare_create(queue + suffix, 0), compare_create(record, state.record)]
        success = [put(queue + suffix, value, s.lease_id)]
        if fast:
            compares.append(compare_empty(queue))
            success.append(put(grants + suffix, b"", s.lease_id))
        reply = await s.txn(compares, [*success, get_prefix(prefix)], [])
        if not reply.succeeded:
            continue  # raced with another change: read again
        revision = int(reply.header.revision)
        if fast:
            return _granted(s, name, hold, suffix, revision, count)
        kvs = reply.responses[-1].response_range.kvs
        return SemState.parse(name, prefix, kvs, revision), suffix, old


def _granted(s: EtcdSession, name: str, hold: int, suffix: bytes, token: int, count: int) -> Grant:
    from tenure.backends.etcd._session import Held

    s.held[name, hold] = Held(suffix, token, count)
    s.follow_grants(name, token + 1)
    return Grant(token, count, None, hold)


async def _wait(
    s: EtcdSession,
    name: str,
    state: SemState,
    suffix: bytes,
    old: Entry | None,
    timeout: float | None,
) -> Grant | None:
    """Wait until request ``suffix`` is admitted and granted, times out, or ends."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    prefix = s.layout.semaphore(s.node, name)
    watcher = None
    gone_at = 0  # the revision that deleted our request, when a watch event told it
    _, hold, _ = _parse(suffix)
    try:
        while True:
            entry = state.entry(suffix)
            if entry is None:
                if not gone_at and watcher is not None:
                    gone_at = await _deleted_at(watcher, prefix + b"q/" + suffix)
                await _vanished(s, name, suffix, gone_at)
            assert entry is not None
            if entry.granted:
                return _granted(s, name, hold, suffix, entry.granted, entry.count)
            if state.turn(suffix):
                grant = await _grant(s, name, state, entry, old)
                if grant is not None:
                    return grant
                state = await s.read(name)
                continue
            if deadline is not None and loop.time() >= deadline:
                if await _withdraw(s, name, suffix):
                    if timeout == 0:
                        return None
                    raise TimeoutError(f"acquire of {name!r} timed out after {timeout:g}s")
                state = await s.read(name)  # granted meanwhile: the grant stands
                continue
            if watcher is None:
                watcher = s.backend.watch_range(prefix, state.revision + 1)
            await _until(watcher.wait(), s.lost.wait(), deadline)
            if s.ended is not None:
                raise s.wait_failure() from None
            events, reset = watcher.drain()
            for event in events:
                if event.type == _DELETE and bytes(event.kv.key) == prefix + b"q/" + suffix:
                    gone_at = int(event.kv.mod_revision)
            if reset:
                state = await s.read(name)
                watcher.restart(state.revision + 1)
            elif _matters(events, prefix, state, entry):
                state = await s.read(name)
    except asyncio.CancelledError:
        if s.ended is None:
            await asyncio.shield(_give_up(s, name, suffix, hold, old))
        raise
    finally:
        if watcher is not None:
            watcher.cancel()


async def _deleted_at(watcher: Watcher, key: bytes) -> int:
    """The revision that deleted ``key``, from the watch (which brings it soon), or 0."""
    try:
        async with asyncio.timeout(2.0):
            while True:
                await watcher.wait()
                events, _ = watcher.drain()
                for event in events:
                    if event.type == _DELETE and bytes(event.kv.key) == key:
                        return int(event.kv.mod_revision)
    except TimeoutError:
        return 0


def _parse(suffix: bytes) -> tuple[int, int, bool]:
    from tenure.backends.etcd._keys import parse_suffix

    return parse_suffix(suffix)


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


def _matters(events: list[Any], prefix: bytes, state: SemState, mine: Entry) -> bool:
    """Whether any event may change the admission of ``mine`` (one ahead of it, or it)."""
    ahead = {e.suffix for e in state.entries if e.created <= mine.created}
    for event in events:
        rest = bytes(event.kv.key)[len(prefix) :]
        if rest == b"rec":
            return True
        if rest.startswith(b"g/") and rest[2:] in ahead:
            return True  # one ahead was granted: our turn may have come
        if rest.startswith(b"q/"):
            if event.type == _DELETE:
                if rest[2:] in ahead:
                    return True
            elif int(event.kv.create_revision) <= mine.created:
                return True  # a request ahead restated in place
    return False


async def _grant(
    s: EtcdSession, name: str, state: SemState, entry: Entry, old: Entry | None
) -> Grant | None:
    """Commit the grant of admitted request ``entry`` (None: read again and retry)."""
    layout = s.layout
    queue, grants = layout.queue(s.node, name), layout.grants(s.node, name)
    success = [put(grants + entry.suffix, b"", s.lease_id)]
    if old is not None:  # an upgrade replaces the hold: its old request and grant go
        success += [delete(queue + old.suffix), delete(grants + old.suffix)]
        s.releasing.add(grants + old.suffix)
    try:
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
            [get(queue + entry.suffix), get(grants + entry.suffix)],
        )
    finally:
        if old is not None:
            s.releasing.discard(grants + old.suffix)
    if reply.succeeded:
        return _granted(s, name, entry.hold, entry.suffix, int(reply.header.revision), entry.count)
    granted = reply.responses[2].response_range.kvs
    if granted and int(granted[0].lease) == s.lease_id:
        # Our first try was applied and its answer lost: the grant stands, and its
        # token is the revision that created it.
        token = int(granted[0].create_revision)
        return _granted(s, name, entry.hold, entry.suffix, token, entry.count)
    if not reply.responses[1].response_range.kvs:
        await _vanished(s, name, entry.suffix, 0)
    if state.record:
        raise NotFoundError(f"semaphore {name!r} was deleted")
    return None


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
