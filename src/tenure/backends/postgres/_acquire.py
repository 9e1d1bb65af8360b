"""Acquiring on PostgreSQL: one call to be granted or queued, then wait for a push.

:class:`PgAcquirer` is a session's :class:`~tenure.backends._store.Acquiring` here:
its acquires (below), its releases and renewals, and its holds read back.

1. ``acquire(...)`` locks the semaphore's row and grants at once when nobody is
   queued and the count fits (a new token from the ``tokens`` sequence, under the
   semaphore's row lock), restates a hold in place when it asks for no more than it holds
   (same token), answers "busy" for ``timeout=0``, or queues the request with a
   deadline on the database's clock. Its request id (random, 63 bits) makes the
   call safe to send again after a lost answer: the database answers from the row
   it left.
2. A queued request **waits for a notification** naming its session (``g<sid>``
   on the node's channel: one of its requests was granted or timed out) or its
   semaphore's forced delete (``d<name>``), subscribed before the call so none is
   missed; then it asks ``check_request`` where it stands: granted, still queued,
   or ended. A release wakes the clients of the waiters it granted, not every
   waiter of the semaphore. Grants are made by whichever transaction frees the
   tokens (``settle``, in the releaser's transaction), so a waiter reads its
   grant; it never races to take it.
3. **Timeouts** are the database's: a timer at the deadline the database gave
   (seconds left by its clock) asks ``check_request``, which ends the request if
   ``clock_timestamp()`` says it is due, and otherwise answers the time left.
4. **Withdrawing** (the session's rule decides when): ``withdraw`` removes the
   request unless it was granted, and answers the grant if it was.
5. **All or none** (``acquire_all``, :mod:`._sql_sets`): one call for every name
   (each a pending of its own, with its hold and request id), under the turns of
   all of them; queued, its members share one wait (one notification wakes it, one
   deadline ends it) until the first member's ends: the others were granted or
   ended in the same transaction, and each then asks once.

Without notifications (a transaction-pooling pgbouncer), a waiter also re-checks
every ``recheck_interval`` seconds: bounded, and said in the docs.

A **release** deletes the hold's owner row (and a queued upgrade of it); a
**renewal** restarts a grant's lease on the database's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol

from tenure._core.handlers.handoffs import digest_of
from tenure.backends._base import Grant, Handoff, HeldGrant
from tenure.backends._ledger import Pending
from tenure.backends._store import QUEUED, Enqueued, InQueue, SessionWork, Withdrawal
from tenure.errors import (
    AcquireCancelledError,
    LeaseLostError,
    LostError,
    NotFoundError,
    TenureError,
)

__all__ = ["PgAcquirer", "PgAcquirerHome"]

#: Seconds past the database's deadline at which a waiter asks (timers fire early
#: and clocks differ a little; asking too early only costs one more call).
SLACK: Final = 0.002


class PgAcquirerHome(Protocol):
    """What acquiring asks of its home, the session's store (a
    :class:`~tenure.backends.postgres._store.PgStore`)."""

    @property
    def session(self) -> SessionWork:
        """The session."""

    @property
    def sid(self) -> int:
        """The session's id."""

    @property
    def recheck(self) -> float | None:
        """Seconds between re-checks of a waiter (None: notifications reach this client)."""

    async def call(self, function: str, *args: object, idempotent: bool = True) -> Any:
        """A function of this session (its fence first)."""

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""

    def joining(self, name: str) -> AbstractAsyncContextManager[None]:
        """Held while a request of this client joins ``name``'s queue."""

    def check_holds(self, name: str | None) -> Coroutine[Any, Any, None]:
        """Read the holds back: those of ``name`` the database no longer has are lost."""

    def reap_now(self) -> None:
        """Let the database end what is due on the node now (a reap)."""


class _Waiting:
    """What a queued request listens to: its session's grants, its semaphores' deletes."""

    def __init__(self, store: PgAcquirerHome, names: Sequence[str]) -> None:
        self.wake = asyncio.Event()
        self.deleted: set[str] = set()  # semaphores deleted by force meanwhile
        self.left: float | None = None  # seconds until its deadline, by the database

        def on_delete(name: str) -> Callable[[], None]:
            def deleted() -> None:
                self.deleted.add(name)
                self.wake.set()

            return deleted

        # A waiter hears of its session's grants and timeouts (``g<sid>``) and of its
        # semaphores' forced deletes (``d<name>``); not of every change of them,
        # which would wake every waiter for each release.
        self._stops = [store.subscribe(f"g{store.sid}", self.wake.set)]
        self._stops += [store.subscribe("d" + name, on_delete(name)) for name in names]

    def stop(self) -> None:
        for stop in self._stops:
            stop()


class _Set:
    """The members of one queued all-or-none set: the wait they share, taken by
    the first member awaited, and what later members need to ask for themselves."""

    def __init__(self, waiting: _Waiting, members: int) -> None:
        self.waiting: _Waiting | None = waiting
        self.left = waiting.left
        self.deleted = waiting.deleted  # (the same set: filled while the first waits)
        self.unread = members  # members whose grants are not read yet


class PgAcquirer:
    """Acquire, wait, withdraw, release, renew, read back (module docstring) for one
    session's store."""

    #: Its release is sent once a call (:meth:`release`;
    #: :class:`~tenure.backends._store.SendsReleaseOnce`).
    release_sent_once = True

    def __init__(self, store: PgAcquirerHome) -> None:
        self._store = store

    def new_request_id(self) -> int:
        """A random request id (63 bits): unused by this session across its owners."""
        return secrets.randbits(63)

    async def enqueue(self, pending: Pending) -> Enqueued:
        """The acquire call (subscribed first: no notification of its wait is missed)."""
        store = self._store
        waiting, queued = _Waiting(store, [pending.name]), False
        try:
            async with store.joining(pending.name):
                answer = await store.call(
                    "acquire",
                    pending.name,
                    pending.hold,
                    pending.count,
                    pending.data,
                    pending.timeout,
                    pending.ephemeral,
                    pending.request_id,
                    pending.max_hold,
                )
            if "token" in answer:
                return self._granted(pending, answer, waiting)
            if answer.get("busy"):
                return None
            waiting.left = answer.get("queued")
            pending.state, queued = waiting, True  # the wait stops it
            return QUEUED
        finally:
            if not queued:
                waiting.stop()

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | InQueue | None:
        """The acquire_all call for every pending (one per name, with the same count,
        data, timeout and ephemeral), under every name's turn (taken in name order:
        two of this client's calls never wait for each other's turns in a cycle)."""
        store, first = self._store, pendings[0]
        names = [pending.name for pending in pendings]
        waiting, queued = _Waiting(store, names), False
        try:
            async with contextlib.AsyncExitStack() as turns:
                for name in sorted(names):
                    await turns.enter_async_context(store.joining(name))
                answer = await store.call(
                    "acquire_all",
                    names,
                    [pending.hold for pending in pendings],
                    first.count,
                    first.data,
                    first.timeout,
                    first.ephemeral,
                    [pending.request_id for pending in pendings],
                )
            if "tokens" in answer:
                self._check_deleted(waiting.deleted)
                return [
                    _grant_of({**answer, "token": token}, pending.hold)
                    for token, pending in zip(answer["tokens"], pendings, strict=True)
                ]
            if answer.get("busy"):
                return None
            if "ended" in answer:  # sent again: it was applied, and ended since
                raise _ended(first, answer)
            waiting.left = answer.get("queued")
            lock_set = _Set(waiting, len(pendings))
            for pending in pendings:
                pending.state = lock_set
            queued = True  # the first member's wait stops it
            return QUEUED
        finally:
            if not queued:
                waiting.stop()

    async def await_grant(self, pending: Pending) -> Grant:
        """Wait for a notification (or the deadline, or a re-check), then ask."""
        state = pending.state
        lock_set = state if isinstance(state, _Set) else None
        if lock_set is None:
            waiting = state
        elif lock_set.waiting is not None:
            waiting, lock_set.waiting = lock_set.waiting, None
        else:
            # The first member's wait ended, and with it this one's (granted or ended
            # in the same transaction): ask at once, and wait on only if that says so.
            waiting = _Waiting(self._store, [pending.name])
            waiting.left, waiting.deleted = lock_set.left, lock_set.deleted
            waiting.wake.set()
        assert isinstance(waiting, _Waiting)
        try:
            grant = await self._wait(pending, waiting)
        finally:
            waiting.stop()
        if lock_set is not None:
            lock_set.unread -= 1
            if not lock_set.unread:  # every grant read: the caller takes them all now
                self._check_deleted(lock_set.deleted)
        return grant

    async def _wait(self, pending: Pending, waiting: _Waiting) -> Grant:
        store, loop = self._store, asyncio.get_running_loop()
        name = pending.name
        left = waiting.left
        deadline = None if left is None else loop.time() + left + SLACK
        recheck = store.recheck
        while True:
            pause = None if deadline is None else max(0.0, deadline - loop.time())
            if recheck is not None:
                pause = recheck if pause is None else min(pause, recheck)
            await _until(waiting.wake, pending.future, pause)
            if pending.future.done():  # the session ended: its future says how
                return pending.future.result()
            waiting.wake.clear()
            try:
                answer = await store.call("check_request", name, pending.hold, pending.request_id)
            except LostError:
                return await pending.future  # the session ended (NotFound if dropped)
            if "token" in answer:
                return self._granted(pending, answer, waiting)
            if "queued" in answer:
                left = answer["queued"]
                deadline = None if left is None else loop.time() + left + SLACK
                continue
            raise _ended(pending, answer)

    def _granted(self, pending: Pending, answer: Any, waiting: _Waiting) -> Grant:
        if not isinstance(pending.state, _Set):  # (a member's: once all are read)
            self._check_deleted(waiting.deleted)
        return _grant_of(answer, pending.hold)

    def _check_deleted(self, deleted: set[str]) -> None:
        """A forced delete was heard while a call was in flight: the grants it answered
        may be gone already. Ask the database (once they are held: the caller takes
        them before this runs)."""
        for name in sorted(deleted):
            self._store.session.spawn(self._store.check_holds(name))

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        """Remove the request unless it was granted; the grant if it was."""
        answer = await self._store.call("withdraw", pending.name, pending.hold, pending.request_id)
        if "token" not in answer:
            return Withdrawal.WITHDRAWN
        return _grant_of(answer, pending.hold)

    async def release(self, name: str, hold: int) -> bool:
        """Delete the hold's owner row (and a queued upgrade of it). Sent once: an answer
        lost after sending raises UnavailableError (the session sends it again), so a
        first send that finds nothing held is the grant's end by the store
        (:class:`~tenure.backends._store.SendsReleaseOnce`)."""
        return bool(await self._store.call("release", name, hold, idempotent=False))

    async def renew(self, name: str, grant: Grant) -> float:
        """Restart the lease of a grant that has a TTL (the node's ``default_lease``)."""
        ttl = float(await self._store.call("renew", name, grant.hold))
        if ttl < 0:  # ran out already, by the database's clock: its reap ends it now
            self._store.reap_now()
            if ttl < -1:  # (-2: at its max_hold's end, which no renewal passes)
                raise LeaseLostError(f"the lease of {name!r} ended: held for its max_hold")
            raise LeaseLostError(f"the lease of {name!r} ran out before it was renewed")
        return ttl

    async def offer_hold(self, name: str, hold: int, secret: bytes) -> Grant:
        """``offer_hold`` (:mod:`._sql_handoffs`): the digest of ``secret`` kept in the
        hold's row; the hold as offered."""
        answer = await self._store.call("offer_hold", name, hold, digest_of(secret))
        return _grant_of(answer, hold)

    async def adopt_hold(self, handoff: Handoff, hold: int) -> HeldGrant:
        """``adopt_hold`` (:mod:`._sql_handoffs`) with the secret, which the database
        hashes; a request id of its own makes it safe to send again."""
        answer = await self._store.call(
            "adopt_hold",
            handoff.name,
            hold,
            handoff.holder,
            handoff.holder_hold,
            handoff.token,
            handoff.secret,
            self.new_request_id(),
        )
        if answer.get("adopted") is False:
            raise LeaseLostError(
                f"the hold on {handoff.name!r} handed off with token {handoff.token} cannot "
                "be adopted: it ended, was adopted already or offered again, or this is not "
                "its hand-off"
            )
        return HeldGrant(handoff.name, _grant_of(answer, hold), bytes.fromhex(answer["data"]))

    async def holds(self) -> list[HeldGrant]:
        """The session's holds as the database keeps them, in (name, hold) order."""
        rows = await self._store.call("holds")
        found = [
            HeldGrant(
                name,
                Grant(int(token), int(count), None if ttl is None else float(ttl), int(hold)),
                bytes.fromhex(data),
            )
            for name, hold, token, count, data, ttl in rows
        ]
        return sorted(found, key=lambda held: (held.name, held.grant.hold))


def _ended(pending: Pending, answer: Any) -> TenureError | TimeoutError:
    """The error of a request that ended without a grant, as the database says."""
    name, ended, message = pending.name, answer.get("ended"), answer.get("message")
    if ended == "timeout":
        return TimeoutError(f"acquire of {name!r} timed out after {pending.timeout:g}s")
    if ended == "not_found":
        return NotFoundError(message or f"semaphore {name!r} was deleted")
    if ended == "lease_lost":  # granted, then deleted before this client read it
        return LeaseLostError(message or f"semaphore {name!r} was deleted")
    return AcquireCancelledError(f"the acquire of {name!r} was withdrawn")


def _grant_of(answer: Any, hold: int) -> Grant:
    """The grant of a granted answer."""
    ttl = answer.get("ttl")
    return Grant(
        int(answer["token"]), int(answer["count"]), None if ttl is None else float(ttl), hold
    )


async def _until(wake: asyncio.Event, ended: asyncio.Future[Any], timeout: float | None) -> None:
    """Until ``wake`` is set or ``ended`` is done, or ``timeout`` seconds pass."""
    if wake.is_set() or ended.done():
        return
    waiting = asyncio.ensure_future(wake.wait())
    try:
        await asyncio.wait({waiting, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
