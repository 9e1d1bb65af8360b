"""What a client remembers of semaphores between acquires: their records, their queues.

An acquire on etcd sends one Txn that *assumes* what it last saw of the semaphore
(its record's create_revision and limit; whether others queue there) and compares
exactly that. A right guess is one round trip; a wrong one costs the Txn's
failure, which reads the truth. These are the guesses, bounded (least recently
used go first).
"""

from __future__ import annotations

import collections
from typing import Final

from tenure.backends.etcd._queue import SemState

__all__ = ["RECORDS_KEPT", "Hints"]

#: How many semaphores a client remembers (each kind).
RECORDS_KEPT: Final = 4096


class Hints:
    """The client's guesses about semaphores (module docstring)."""

    def __init__(self) -> None:
        #: The last record seen of each semaphore, ``(create_revision, limit)``.
        self.records: collections.OrderedDict[tuple[str, str], tuple[int, int]] = (
            collections.OrderedDict()
        )
        #: Semaphores whose last acquire here found a queue.
        self._contended: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()

    def record(self, node: str, name: str) -> tuple[int, int] | None:
        """The last record seen of ``name``: ``(create_revision, limit)``, or None."""
        return self.records.get((node, name))

    def remember(self, node: str, state: SemState) -> None:
        """Keep what ``state`` (read now) says of its record, for the next acquire."""
        key = (node, state.name)
        if state.record:
            self.records[key] = (state.record, state.limit)
            self.records.move_to_end(key)
            if len(self.records) > RECORDS_KEPT:
                self.records.popitem(last=False)
        else:
            self.records.pop(key, None)

    def forget(self, node: str, name: str) -> None:
        """``name`` was deleted: its record is gone."""
        self.records.pop((node, name), None)

    def is_contended(self, node: str, name: str) -> bool:
        """Whether the last acquire of ``name`` here found others queued or holding."""
        return (node, name) in self._contended

    def contended(self, node: str, name: str, found: bool) -> None:
        """Note whether an acquire of ``name`` found others queued or holding."""
        key = (node, name)
        if not found:
            self._contended.pop(key, None)
            return
        self._contended[key] = None
        self._contended.move_to_end(key)
        if len(self._contended) > RECORDS_KEPT:
            self._contended.popitem(last=False)
