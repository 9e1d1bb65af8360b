"""The sync counter: ``session.counter("jobs-done").add(1)``."""

from __future__ import annotations

from tenure import client as aio
from tenure.sync._leases import LeaseSession
from tenure.sync._recipe import SyncRecipe


class Counter(SyncRecipe[LeaseSession, aio.Counter]):
    """A named integer shared by every session of the node (see :class:`tenure.Counter`)."""

    def get(self) -> int:
        """The value now (0 for a counter never written)."""
        return self.session.portal.call(self._recipe.get)

    def add(self, delta: int = 1) -> int:
        """Add ``delta`` (negative subtracts) and return the new value."""
        return self.session.portal.call(self._recipe.add, delta)

    def compare_and_set(self, expected: int, new: int) -> bool:
        """Set the value to ``new`` if it is ``expected`` now; whether it did."""
        return self.session.portal.call(self._recipe.compare_and_set, expected, new)
