"""Acquiring on PostgreSQL: one call to be granted or queued, then wait for a push.

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

Without notifications (a transaction-pooling pgbouncer), a waiter also re-checks
every ``recheck_interval`` seconds: bounded, and said in the docs.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Protocol

from tenure.backends._base import Grant
from tenure.backends._ledger import Pending
from tenure.backends._store import QUEUED, Enqueued, Owner, Withdrawal
from tenure.errors import AcquireCancelledError, LeaseLostError, LostError, NotFoundError

__all__ = ["AcquireHost", "Acquirer"]

#: Seconds past the database's deadline at which a waiter asks (timers fire early
#: and clocks differ a little; asking too early only costs one more call).
SLACK: Final = 0.002


class AcquireHost(Protocol):
    """What acquiring needs of the session's store."""

    @property
    def owner(self) -> Owner:
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


class _Waiting:
    """What a queued request listens to: its session's grants, its semaphore's delete."""

    def __init__(self, host: AcquireHost, name: str) -> None:
        self.wake = asyncio.Event()
        self.deleted = False
        self.left: float | None = None  # seconds until its deadline, by the database

        def on_delete() -> None:
            self.deleted = True
            self.wake.set()

        # A waiter hears of its session's grants and timeouts (``g<sid>``) and of its
        # semaphore's forced delete (``d<name>``); not of every change of the
        # semaphore, which would wake every waiter for each release.
        self._stops = (
            host.subscribe(f"g{host.sid}", self.wake.set),
            host.subscribe("d" + name, on_delete),
        )

    def stop(self) -> None:
        for stop in self._stops:
            stop()


class Acquirer:
    """Acquire, wait, withdraw (module docstring) for one session's store."""

    def __init__(self, host: AcquireHost) -> None:
        self._host = host

    def new_request_id(self) -> int:
        """A random request id (63 bits): unused by this session across its owners."""
        return secrets.randbits(63)

    async def enqueue(self, pending: Pending) -> Enqueued:
        """The acquire call (subscribed first: no notification of its wait is missed)."""
        host = self._host
        waiting, queued = _Waiting(host, pending.name), False
        try:
            async with host.joining(pending.name):
                answer = await host.call(
                    "acquire",
                    pending.name,
                    pending.hold,
                    pending.count,
                    pending.data,
                    pending.timeout,
                    pending.ephemeral,
                    pending.request_id,
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

    async def await_grant(self, pending: Pending) -> Grant:
        """Wait for a notification (or the deadline, or a re-check), then ask."""
        waiting = pending.state
        assert isinstance(waiting, _Waiting)
        try:
            return await self._wait(pending, waiting)
        finally:
            waiting.stop()

    async def _wait(self, pending: Pending, waiting: _Waiting) -> Grant:
        host, loop = self._host, asyncio.get_running_loop()
        name = pending.name
        left = waiting.left
        deadline = None if left is None else loop.time() + left + SLACK
        recheck = host.recheck
        while True:
            pause = None if deadline is None else max(0.0, deadline - loop.time())
            if recheck is not None:
                pause = recheck if pause is None else min(pause, recheck)
            await _until(waiting.wake, pending.future, pause)
            if pending.future.done():  # the session ended: its future says how
                return pending.future.result()
            waiting.wake.clear()
            try:
                answer = await host.call("check_request", name, pending.hold, pending.request_id)
            except LostError:
                return await pending.future  # the session ended (NotFound if dropped)
            if "token" in answer:
                return self._granted(pending, answer, waiting)
            if "queued" in answer:
                left = answer["queued"]
                deadline = None if left is None else loop.time() + left + SLACK
                continue
            ended = answer.get("ended")
            if ended == "timeout":
                raise TimeoutError(f"acquire of {name!r} timed out after {pending.timeout:g}s")
            if ended == "not_found":
                raise NotFoundError(answer.get("message") or f"semaphore {name!r} was deleted")
            if ended == "lease_lost":  # granted, then deleted before this client read it
                raise LeaseLostError(answer.get("message") or f"semaphore {name!r} was deleted")
            raise AcquireCancelledError(f"the acquire of {name!r} was withdrawn")

    def _granted(self, pending: Pending, answer: Any, waiting: _Waiting) -> Grant:
        if waiting.deleted:
            # A forced delete was heard while a call was in flight: the grant it
            # answered may be gone already. Ask the database (once it is held).
            self._host.owner.spawn(self._host.check_holds(pending.name))
        return _grant_of(answer, pending.hold)

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        """Remove the request unless it was granted; the grant if it was."""
        answer = await self._host.call("withdraw", pending.name, pending.hold, pending.request_id)
        if "token" not in answer:
            return Withdrawal.WITHDRAWN
        return _grant_of(answer, pending.hold)


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
