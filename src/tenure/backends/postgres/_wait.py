"""Acquiring on PostgreSQL: one call to be granted or queued, then wait for a push.

1. ``acquire(...)`` locks the semaphore's row and grants at once when nobody is
   queued and the count fits (a new token from the counter row, in the same
   transaction), restates a hold in place when it asks for no more than it holds
   (same token), answers "busy" for ``timeout=0``, or queues the request with a
   deadline on the database's clock. Its request id (random, 63 bits) makes the
   call safe to send again after a lost answer: the database answers from the row
   it left.
2. A queued request **waits for a notification** naming its session (``g<sid>``
   on the node's channel: one of its requests was granted or timed out) or its
   semaphore's forced delete (``d<name>``), subscribed before the call so none is
   missed; then it asks ``check_request`` where it stands: granted, still queued,
   or ended. A release wakes the clients of the waiters it granted, not every
   waiter of the semaphore. Grants are made by whichever
   transaction frees the tokens (``settle``, in the releaser's transaction), so a
   waiter reads its grant; it never races to take it.
3. **Timeouts** are the database's: a timer at the deadline the database gave
   (seconds left by its clock) asks ``check_request``, which ends the request if
   ``clock_timestamp()`` says it is due, and otherwise answers the time left.
4. **Cancelled** while waiting: ``withdraw`` removes the request unless it was
   granted; a grant that raced the cancellation is released (an upgrade's is kept:
   it replaced the hold). The cancelled caller waits for that at most
   :data:`GIVE_UP_WAIT`; with the database out of reach it goes on in the
   background, within the session's window, the hold's number kept busy meanwhile.
   A call whose connection broke is retried within the session's window (same
   request id), so no request is left behind by a lost answer either.

Without notifications (a transaction-pooling pgbouncer), a waiter also re-checks
every ``recheck_interval`` seconds: bounded, and said in the docs.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import TYPE_CHECKING, Any

from tenure.backends._base import Grant
from tenure.errors import (
    AcquireCancelledError,
    LeaseLostError,
    LostError,
    NotFoundError,
    TenureError,
)

if TYPE_CHECKING:
    from tenure.backends.postgres._session import PgSession

__all__ = ["request"]

#: Seconds a cancelled acquire waits for its withdraw before leaving it to run on in
#: the background (it takes milliseconds while the database answers).
GIVE_UP_WAIT = 1.0

#: Seconds past the database's deadline at which a waiter asks (timers fire early
#: and clocks differ a little; asking too early only costs one more call).
SLACK = 0.002


async def request(
    s: PgSession,
    name: str,
    hold: int,
    count: int,
    data: bytes,
    timeout: float | None,
    ephemeral: bool,
    restating: bool,
) -> Grant | None:
    """Acquire (or restate) hold ``hold`` of ``name``; see the module docstring."""
    place: tuple[str, int] | None = (name, hold)
    s.busy.add((name, hold))
    request_id = secrets.randbits(63)
    wake = asyncio.Event()
    # A waiter hears of its session's grants and timeouts (``g<sid>``) and of its
    # semaphore's forced delete (``d<name>``); not of every change of the semaphore,
    # which would wake every waiter for each release.
    listener = s.backend.listener
    deleted = asyncio.Event()

    def on_delete() -> None:
        deleted.set()
        wake.set()

    stops = (
        listener.subscribe(s.channel, f"g{s.sid}", wake.set),
        listener.subscribe(s.channel, "d" + name, on_delete),
    )
    try:
        grant = await _request(s, name, hold, count, data, timeout, ephemeral, request_id, wake)
        if grant is not None and deleted.is_set():
            # A forced delete was heard while a call was in flight: the grant it
            # answered may be gone already, and that delete's news came before the
            # grant's own subscription did. Ask the database.
            s.spawn(s.check_holds(name))
        return grant
    except asyncio.CancelledError:
        # Also while the acquire itself was in flight: it may have been applied.
        if s.ended is None:
            giving_up = asyncio.ensure_future(_give_up(s, name, hold, request_id, restating))
            # The hold's number stays taken until the withdraw is through.
            giving_up.add_done_callback(lambda _: s.busy.discard(place))
            # Usually a few milliseconds; with the database out of reach the caller
            # does not wait the window for it: it goes on in the background.
            await asyncio.wait({giving_up}, timeout=GIVE_UP_WAIT)
            if not giving_up.done():
                s.keep(giving_up)
                place = None  # busy until the background withdraw ends
        raise
    finally:
        for stop in stops:
            stop()
        if place is not None:
            s.busy.discard(place)


async def _request(
    s: PgSession,
    name: str,
    hold: int,
    count: int,
    data: bytes,
    timeout: float | None,
    ephemeral: bool,
    request_id: int,
    wake: asyncio.Event,
) -> Grant | None:
    """The acquire call, then the wait if it was queued."""
    async with s.backend.joining(s.node, name):
        answer = await s.call("acquire", name, hold, count, data, timeout, ephemeral, request_id)
    if "token" in answer:
        return s.granted(name, hold, *_grant_of(answer))
    if answer.get("busy"):
        return None
    return await _wait(s, name, hold, request_id, wake, answer.get("queued"), timeout)


async def _wait(
    s: PgSession,
    name: str,
    hold: int,
    request_id: int,
    wake: asyncio.Event,
    left: float | None,
    timeout: float | None,
) -> Grant:
    loop = asyncio.get_running_loop()
    deadline = None if left is None else loop.time() + left + SLACK
    recheck = None if s.backend.notifications else s.backend.options.recheck_interval
    while True:
        pause = None if deadline is None else max(0.0, deadline - loop.time())
        if recheck is not None:
            pause = recheck if pause is None else min(pause, recheck)
        await _until(wake, s.lost, pause)
        if s.ended is not None:
            raise s.wait_failure()
        wake.clear()
        try:
            answer = await s.call("check_request", name, hold, request_id)
        except LostError:
            raise s.wait_failure() from None
        if "token" in answer:
            return s.granted(name, hold, *_grant_of(answer))
        if "queued" in answer:
            left = answer["queued"]
            deadline = None if left is None else loop.time() + left + SLACK
            continue
        ended = answer.get("ended")
        if ended == "timeout":
            raise TimeoutError(f"acquire of {name!r} timed out after {timeout:g}s")
        if ended == "not_found":
            raise NotFoundError(answer.get("message") or f"semaphore {name!r} was deleted")
        if ended == "lease_lost":  # granted, then deleted before this client read it
            raise LeaseLostError(answer.get("message") or f"semaphore {name!r} was deleted")
        raise AcquireCancelledError(f"the acquire of {name!r} was withdrawn")


def _grant_of(answer: Any) -> tuple[int, int, float | None]:
    """Token, count and lease TTL of a granted answer."""
    ttl = answer.get("ttl")
    return int(answer["token"]), int(answer["count"]), None if ttl is None else float(ttl)


async def _until(wake: asyncio.Event, lost: asyncio.Event, timeout: float | None) -> None:
    """Until ``wake`` or ``lost`` is set, or ``timeout`` seconds pass."""
    if wake.is_set() or lost.is_set():
        return
    tasks: set[asyncio.Future[Any]] = {
        asyncio.ensure_future(wake.wait()),
        asyncio.ensure_future(lost.wait()),
    }
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def _give_up(s: PgSession, name: str, hold: int, request_id: int, restating: bool) -> None:
    """The asker was cancelled: withdraw, or undo a grant that raced the cancellation."""
    with contextlib.suppress(TenureError):  # the caller is cancelled: that is what it sees
        answer = await s.call("withdraw", name, hold, request_id)
        if "token" not in answer:
            return
        if restating:  # the upgrade replaced the hold: keep it, as granted
            s.granted(name, hold, *_grant_of(answer))
        else:
            s.forget(name, hold)
            await s.release_hold(name, hold)
