"""Leader election: campaign, proclaim, resign, observe, and ask who leads.

An election is a mutex whose owner data is the leader's data (an address, say).
Campaigners queue in arrival order; the first becomes leader, and the next one
takes over when the leader resigns or its session is lost.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from tenure._core.values import MAX_COUNT, SemaphoreDescription
from tenure.client._args import Data
from tenure.client._lease import Leadership, open_lease
from tenure.client._opening import Opening
from tenure.client._recipe_session import NamedRecipe, RecipeSession
from tenure.client._semaphore import Semaphore
from tenure.errors import NotFoundError


@dataclass(frozen=True, slots=True)
class LeaderState:
    """Who leads an election, as seen by one session.

    With no leader, ``session_id`` and ``token`` are None and ``data`` is empty.
    """

    data: bytes
    is_me: bool
    session_id: int | None
    token: int | None

    @property
    def has_leader(self) -> bool:
        """Whether somebody leads."""
        return self.session_id is not None


class Election(NamedRecipe):
    """The election ``name`` in the session's node."""

    def __init__(self, session: RecipeSession, name: str) -> None:
        super().__init__(session, name)
        # The semaphore behind the election, to read and watch who holds it.
        self._semaphore = Semaphore(session, self.name)

    def campaign(self, data: Data = b"", *, timeout: float | None = None) -> Opening[Leadership]:
        """Wait to become leader with ``data``; ``await`` it or use ``async with``.

        In ``async with``, the block is cancelled if leadership is lost, and raises
        LeaderChangedError (or the session's loss error). Leaving the block resigns.
        Bad arguments raise InvalidArgumentError at once (before the await).
        """
        return open_lease(self.session, self.name, MAX_COUNT, data, timeout, True, Leadership)

    async def leader(self) -> LeaderState | None:
        """The current leader, or None when nobody leads."""
        try:
            description = await self._semaphore.describe(owners=True)
        except NotFoundError:
            return None
        state = self._state(description)
        return state if state.has_leader else None

    async def observe(self) -> AsyncGenerator[LeaderState, None]:
        """Yield the current leader state at once, then on every change of leader or data."""
        last: LeaderState | None = None
        async for description in self._semaphore.watch(owners=True):
            state = self._state(description)
            if state != last:
                last = state
                yield state

    def _state(self, description: SemaphoreDescription) -> LeaderState:
        if not description.owners:
            return LeaderState(b"", False, None, None)
        owner = description.owners[0]
        return LeaderState(
            owner.data, owner.session_id == self.session.id, owner.session_id, owner.token
        )
