"""The sync election: ``with session.election("scheduler").campaign(b"host-a") as leadership:``."""

from __future__ import annotations

from tenure import client as aio
from tenure.client import LeaderState
from tenure.client._args import Data
from tenure.sync._calls import opened
from tenure.sync._leases import Leadership, RecipeSession
from tenure.sync._recipe import SyncRecipe
from tenure.sync._stream import Stream, same


class Election(SyncRecipe[RecipeSession, aio.Election]):
    """The election ``name`` (see :class:`tenure.Election`)."""

    def campaign(self, data: Data = b"", *, timeout: float | None = None) -> Leadership:
        """Wait to become leader with ``data``; plain, or ``with`` (resigns at the end).

        Raises:
            TimeoutError: not leader within ``timeout``.
        """
        return self.session.portal.call(
            opened, lambda: self._recipe.campaign(data, timeout=timeout), self._wrap
        )

    def _wrap(self, leadership: aio.Leadership) -> Leadership:
        return self.session.keep_lease(Leadership(self.session, leadership))

    def leader(self) -> LeaderState | None:
        """The current leader, or None when nobody leads."""
        return self.session.portal.call(self._recipe.leader)

    def observe(self) -> Stream[LeaderState]:
        """The leader state now, then on every change of leader or data."""
        return Stream(self.session.portal, self._recipe.observe(), same)
