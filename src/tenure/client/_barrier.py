"""Barriers: ``parties`` waiters go together, then the barrier is ready for the next round.

The barrier ``name`` is the persistent semaphore ``name`` (limit ``MAX_COUNT``, so
an arrival never queues). A party arrives by holding one token of it, which lives
and dies with its session, and so has a fencing token ``T`` larger than every
earlier grant's (its owner data, ``parties N``, only tells people how many the party
waits for: :mod:`tenure._core.kinds`). The data says where the last round ended:
``"ROUND LAST"``, LAST being the token of the last party let through (the format's
one home: :mod:`tenure._core.barrier_data`). A round trips when the live holds with
tokens above LAST number ``parties`` or more: whoever sees it first (any waiting
party, on every change it watches) writes ``"ROUND+1 T_p"``, T_p the ``parties``-th
of those tokens, by a compare-and-set of the data, so exactly one write wins. A
party has passed when its own token is at most LAST: its hold was alive when the
round that let it through was counted, and that round counted every live hold
between the previous LAST and its own. So:

* nobody passes before ``parties`` arrivals of one round are all there at once;
* a party whose session is lost before the round trips is not counted (its hold is
  gone), so the others wait for a live one instead;
* a party that gives up (timeout, cancellation) takes its hold back first and then
  looks again: if a round let it through meanwhile it passed after all, since a
  round counted after its release cannot include it.
"""

from __future__ import annotations

import asyncio
import contextlib

from tenure._core.barrier_data import START, barrier_progress, parties_data, progress_data
from tenure._core.values import MAX_COUNT, SemaphoreDescription
from tenure.client import _args
from tenure.client._lease import Lease
from tenure.client._recipe_session import NamedRecipe, RecipeSession
from tenure.client._semaphore import Semaphore
from tenure.errors import InvalidArgumentError, NotFoundError


class Barrier(NamedRecipe):
    """A named cyclic barrier in the session's node (see the module docstring).

    ``await barrier.wait(timeout=60)``: returns once ``parties`` parties, in any
    sessions, are waiting at once; they all go, and the next round begins.
    """

    def __init__(self, session: RecipeSession, name: str, parties: int) -> None:
        if type(parties) is not int or parties < 1:
            raise InvalidArgumentError(f"parties must be an int of 1 or more, got {parties!r}")
        super().__init__(session, name)
        self.parties = parties
        self._semaphore = Semaphore(session, self.name)
        self._made = False

    def __repr__(self) -> str:
        return f"<Barrier {self.name!r} ({self.parties} parties) of session {self.session.id}>"

    async def rounds(self) -> int:
        """How many rounds have passed."""
        await self._make()
        return barrier_progress(self.name, (await self._semaphore.describe()).data)[0]

    async def wait(self, timeout: float | None = None) -> None:
        """Arrive, and return when ``parties`` parties are here (this one included).

        ``timeout`` is seconds of this process's clock (None: no limit).

        Raises:
            TimeoutError: the round did not fill within ``timeout`` (this party's
                arrival is taken back).
            NotFoundError: the barrier was deleted meanwhile.
            LostError: the session was lost meanwhile (its loss error).
        """
        wait = _args.timeout(timeout)
        await self._make()
        # (The arrival's data, "parties N", is for people: `tenure describe` and the
        # dashboard show "2/4 arrived" from it. No party reads it.)
        arrival = await self._semaphore.acquire(1, data=parties_data(self.parties))
        try:
            async with asyncio.timeout(wait):
                await self._until_passed(arrival)
        except TimeoutError:
            await arrival.release()
            if await self._passed(arrival.token):
                return  # a round let it through as it gave up: it passed
            raise
        finally:
            # (Idempotent: nothing more after the release above, or on a lost
            # session, whose holds are gone anyway.)
            await arrival.release()

    async def _until_passed(self, arrival: Lease) -> None:
        states = self._semaphore.watch(data=True, owners=True)
        async with contextlib.aclosing(states):
            async for state in states:
                if not state.exists:
                    raise NotFoundError(f"barrier {self.name!r} was deleted while waited for")
                if await self._check(state, arrival.token):
                    return

    async def _check(self, state: SemaphoreDescription, token: int) -> bool:
        """Whether the party of ``token`` has passed; trips the round if it is full."""
        rounds, last = barrier_progress(self.name, state.data)
        if token <= last:
            return True
        waiting = sorted(owner.token for owner in state.owners if owner.token > last)
        if len(waiting) >= self.parties:
            new = progress_data(rounds + 1, waiting[self.parties - 1])
            await self._semaphore.compare_and_set(state.data, new)
            # Won or lost, the watch brings the data that decides (this party's
            # token is among the first ``parties`` only if it was counted).
        return False

    async def _passed(self, token: int) -> bool:
        try:
            data = (await self._semaphore.describe()).data
        except NotFoundError:
            return False
        return token <= barrier_progress(self.name, data)[1]

    async def _make(self) -> None:
        """Create the barrier if nobody did (once per object)."""
        if not self._made:
            await self._semaphore.create(MAX_COUNT, START, exist_ok=True)
            self._made = True
