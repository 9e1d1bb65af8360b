"""The hold steps of the linearizable workload's clients: mutexes, semaphores, elections,
and hand-offs (:class:`HoldSteps`; :mod:`tenure.testing.workload._client`'s docstring says
what each records).

**Hand-off.** ``hand-off-mutex``: a client locks a mutex, holds it a while, then offers
it (``lease.handoff()``), putting the string in its worker's offers
(:attr:`~tenure.testing.workload.Books.offers`), and waits up to :data:`OFFER_WAIT`
for another client to adopt it; then it releases it. ``adopt-mutex``: a client takes
the oldest offer and adopts it (``session.adopt(text)``): the offering lease ends lost
and this session holds the mutex under a new token, in one step of the service;
recorded as an ``acquire`` of the ``mutex`` model (``ok`` with the new token; ``fail``
when the hold had ended first: ``LeaseLostError``), then held and released as any
lock. With no offer waiting, it locks a mutex as ``hold-mutex`` does.

An adoption ends the offered hold, and its lease is told (the service's push), or, if
the holder's release crossed the adoption, told as the release returns: every store
makes the loss the lease's ``lost_reason`` when ``release()`` returns (where the
config says the target does, :attr:`LinConfig.told_when_crossed`: by default). Untold,
an adoption may have ended the hold any time from the offer on, so once the offer is
made a ``lost`` invoked at the offer and never completed is recorded
(``w0c1/untold-<key>-<token>``). It stands unless the release is answered ``ok`` or
``fail`` (:func:`~tenure.testing.workload.close_holds` drops it then): it stands when
the release is ``info`` (its answer lost, its session ended: the loss then never
reaches the holder; on a target that does not tell a crossed end, whose release
returns as if it had released, ``info`` too), and when the client was killed before
its release was answered. So the ``mutex`` model holds a hand-off to its rules: the
offering hold ends before the adopting one begins, and the adopter's token is greater
than every token before it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Final

import tenure
from tenure.errors import LeaseLostError, PreconditionFailedError, TenureError
from tenure.testing.workload._recording import ANSWER_LOST, LinRecorder

__all__ = ["MAX_COUNT", "MAX_HOLD", "OFFER_WAIT", "HoldSteps"]

#: The largest count a semaphore step takes (its limit: :data:`SEMAPHORES`).
MAX_COUNT: Final = 2
#: Seconds a bounded lock's ``max_hold`` is, at random between the two (about the
#: holds' own: many outlast it).
MAX_HOLD: Final = (0.02, 0.2)
#: Seconds an offered hold waits to be adopted before its client releases it.
OFFER_WAIT: Final = 1.0


class HoldSteps(LinRecorder):
    """The hold steps (module docstring), over :class:`LinRecorder`'s recording."""

    async def hold_mutex(self, session: tenure.Session) -> None:
        """``lock()``, a hold (perhaps a pause of the whole worker), ``release()``."""
        key = self.rng.choice(self.config.mutexes)
        mutex = session.mutex(key)

        def take() -> Awaitable[tenure.Lease]:
            return mutex.lock(timeout=self.config.acquire_wait)

        await self._hold(session, "mutex", key, None, take)

    async def hold_bounded_mutex(self, session: tenure.Session) -> None:
        """``lock()`` of a mutex with a ``max_hold`` of :data:`MAX_HOLD` (the server
        ends the lock that long after its grant), a hold that may outlast it, then
        ``release()``: a lock the server ended is a loss, told by its push or, if the
        release crossed it, as the release returns (``fail``, and the ``lost``)."""
        key = self.rng.choice(self.config.mutexes)
        mutex = session.mutex(key, max_hold=self.rng.uniform(*MAX_HOLD))

        def take() -> Awaitable[tenure.Lease]:
            return mutex.lock(timeout=self.config.acquire_wait)

        # (the server may end it before its grant reaches this client: a grant held up
        # on a slow link, seen after its max_hold passed)
        await self._hold(session, "mutex", key, None, take, ends_unseen=True)

    async def hold_semaphore(self, session: tenure.Session) -> None:
        """``acquire(name, count)`` of a semaphore (its limit
        :data:`~tenure.testing.workload.SEMAPHORES`'s), a hold, ``release()``: the
        ``semaphore`` model, its value the count."""
        key, count = self.rng.choice(self.config.semaphores), self.rng.randint(1, MAX_COUNT)

        def take() -> Awaitable[tenure.Lease]:
            return session.acquire(key, count, timeout=self.config.acquire_wait)

        await self._hold(session, "semaphore", key, count, take)

    async def read_holders(self, session: tenure.Session) -> None:
        """``describe(owners=True)`` of a semaphore: a ``holders`` of their tokens."""
        key = self.rng.choice(self.config.semaphores)

        async def holders() -> list[int]:
            found = await session.semaphore(key).describe(owners=True)
            return sorted(owner.token for owner in found.owners)

        await self._call("semaphore", "holders", key, None, holders, lambda t: (True, t))

    async def lead_election(self, session: tenure.Session) -> None:
        """``campaign()`` (an ``acquire`` of the ``mutex`` model, its key the
        election's), leading a while, ``resign()``."""
        key = self.rng.choice(self.config.elections)
        election = session.election(key)

        def take() -> Awaitable[tenure.Lease]:
            return election.campaign(self.label.encode(), timeout=self.config.acquire_wait)

        await self._hold(session, "mutex", key, None, take)

    async def read_leader(self, session: tenure.Session) -> None:
        """``leader()``: a ``holders`` of the leader's token (none: nobody leads)."""
        key = self.rng.choice(self.config.elections)

        async def leader() -> list[int]:
            state = await session.election(key).leader()
            return [] if state is None or state.token is None else [state.token]

        await self._call("mutex", "holders", key, None, leader, lambda t: (True, t))

    async def hand_off_mutex(self, session: tenure.Session) -> None:
        """``lock()``, a hold, ``handoff()`` offered for a while, ``release()`` (module
        docstring)."""
        key = self.rng.choice(self.config.mutexes)
        mutex = session.mutex(key)

        def take() -> Awaitable[tenure.Lease]:
            return mutex.lock(timeout=self.config.acquire_wait)

        await self._hold(session, "mutex", key, None, take, before_release=self._offer)

    async def _offer(self, lease: tenure.Lease) -> bool:
        """Offer ``lease`` to the worker's other clients; wait until it is adopted (it
        ends lost) or :data:`OFFER_WAIT` passes, and withdraw the offer. True if it was
        offered: an adoption may have ended it untold from the offer on, recorded so at
        once (a ``lost`` never completed: the module docstring)."""
        called = self.books.now_ns()
        try:
            async with asyncio.timeout(self.config.op_timeout):
                text = await lease.handoff()
        except ANSWER_LOST as error:  # (offered or not: nobody has the string)
            self.rec.note(self.label, "handoff-failed", error=repr(error))
            return False
        except TenureError as error:  # (lost first, or its session)
            self.rec.note(self.label, "handoff-failed", error=repr(error))
            return False
        self._untold("mutex", lease.name, lease.token, called)
        offer = (lease.name, text)
        self.books.offers.append(offer)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(OFFER_WAIT):
                    await lease.lost
        finally:
            with contextlib.suppress(ValueError):  # (taken by an adopter)
                self.books.offers.remove(offer)
        return True

    async def adopt_mutex(self, session: tenure.Session) -> None:
        """``adopt()`` of the oldest hold offered (an ``acquire``: ``ok`` with its new
        token, ``fail`` if it ended first), a hold, ``release()``; a mutex locked as
        :meth:`hold_mutex` does if none is offered."""
        if not self.books.offers:
            await self.hold_mutex(session)
            return
        key, text = self.books.offers.pop(0)

        def take() -> Awaitable[tenure.Lease]:
            return session.adopt(text)

        # (refused: the hold ended first; or this session holds the mutex already, its
        # release unanswered)
        refused = (LeaseLostError, PreconditionFailedError)
        await self._hold(session, "mutex", key, None, take, refused=refused)
