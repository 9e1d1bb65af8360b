"""The sync latch: ``session.latch("warmup", count=3)``."""

from __future__ import annotations

from tenure import client as aio
from tenure.sync._leases import LeaseSession
from tenure.sync._recipe import SyncRecipe


class Latch(SyncRecipe[LeaseSession, aio.Latch]):
    """A named count-down latch (see :class:`tenure.Latch`)."""

    def __init__(self, session: LeaseSession, latch: aio.Latch) -> None:
        super().__init__(session, latch)
        self.count = latch.count

    def count_down(self) -> int:
        """Take one off the count (not below zero); the count left."""
        return self.session.portal.call(self._recipe.count_down)

    def remaining(self) -> int:
        """The count left (0: open)."""
        return self.session.portal.call(self._recipe.remaining)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the count is zero (TimeoutError after ``timeout`` seconds)."""
        self.session.portal.call(self._recipe.wait, timeout)
