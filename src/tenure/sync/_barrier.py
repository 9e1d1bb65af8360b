"""The sync barrier: ``session.barrier("stage-2", parties=4).wait(timeout=60)``."""

from __future__ import annotations

from tenure import client as aio
from tenure.sync._leases import LeaseSession
from tenure.sync._recipe import SyncRecipe


class Barrier(SyncRecipe[LeaseSession, aio.Barrier]):
    """A named cyclic barrier (see :class:`tenure.Barrier`)."""

    def __init__(self, session: LeaseSession, barrier: aio.Barrier) -> None:
        super().__init__(session, barrier)
        self.parties = barrier.parties

    def __repr__(self) -> str:
        return f"<sync Barrier {self.name!r} ({self.parties} parties) of session {self.session.id}>"

    def rounds(self) -> int:
        """How many rounds have passed."""
        return self.session.portal.call(self._recipe.rounds)

    def wait(self, timeout: float | None = None) -> None:
        """Arrive, and block until ``parties`` parties are here (TimeoutError after
        ``timeout`` seconds, the arrival taken back)."""
        self.session.portal.call(self._recipe.wait, timeout)
