"""The sync counter: ``session.counter("jobs-done").add(1)``."""

from __future__ import annotations

from tenure import client as aio
from tenure.sync._leases import LeaseSession


class Counter:
    """A named integer shared by every session of the node (see :class:`tenure.Counter`)."""

    def __init__(self, session: LeaseSession, counter: aio.Counter) -> None:
        self.session = session
        self.name = counter.name
        self._counter = counter

    def __repr__(self) -> str:
        return f"<sync Counter {self.name!r} of session {self.session.id}>"

    def get(self) -> int:
        """The value now (0 for a counter never written)."""
        return self.session._portal.call(self._counter.get)

    def add(self, delta: int = 1) -> int:
        """Add ``delta`` (negative subtracts) and return the new value."""
        return self.session._portal.call(self._counter.add, delta)

    def compare_and_set(self, expected: int, new: int) -> bool:
        """Set the value to ``new`` if it is ``expected`` now; whether it did."""
        return self.session._portal.call(self._counter.compare_and_set, expected, new)
