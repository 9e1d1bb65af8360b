"""The sync latch: ``session.latch("warmup", count=3)``."""

from __future__ import annotations

from tenure import client as aio
from tenure.sync._leases import LeaseSession


class Latch:
    """A named count-down latch (see :class:`tenure.Latch`)."""

    def __init__(self, session: LeaseSession, latch: aio.Latch) -> None:
        self.session = session
        self.name = latch.name
        self.count = latch.count
        self._latch = latch

    def __repr__(self) -> str:
        return f"<sync Latch {self.name!r} of session {self.session.id}>"

    def count_down(self) -> int:
        """Take one off the count (not below zero); the count left."""
        return self.session._portal.call(self._latch.count_down)

    def remaining(self) -> int:
        """The count left (0: open)."""
        return self.session._portal.call(self._latch.remaining)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the count is zero (TimeoutError after ``timeout`` seconds)."""
        self.session._portal.call(self._latch.wait, timeout)
