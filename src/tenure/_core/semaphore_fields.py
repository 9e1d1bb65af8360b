"""What a semaphore keeps, and how compactly: its fields, their defaults. [compiled]

:class:`SemaphoreFields` is the base of :class:`~tenure._core.semaphore.Semaphore`:
the fields and the accessors of those an ephemeral mutex never changes, kept apart
from the rules (holders, the FIFO queue, the grant rule) that the semaphore module
states, so that each module says one thing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from tenure._core.holders import Owner, Waiter
from tenure._core.quotas import Usage
from tenure._core.values import MAX_COUNT


class SemaphoreFields:
    """The fields of one semaphore.

    Memory: a server may hold a million of these (mostly held mutexes), so the
    common shapes cost no container of their own. ``_owners`` is None (nobody
    holds), the one Owner (the usual case: a held mutex), or a dict by session id
    (two or more, in grant order). What an ephemeral mutex never changes (its
    limit MAX_COUNT, no data), its queue (None while nobody waits) and its
    lock-delay are in ``_rest``, a :class:`SemaphoreRest` made only for a semaphore that
    differs (a created one, one with waiters or a lock-delay): a held mutex is
    then five fields, 80 bytes where nine took 112. The queue is an OrderedDict
    by holder key in service order (a plain dict's first entry is found past every
    slot emptied at its front: serving a queue of n waiters in one step cost n**2
    / 2 of those, 0.3 s for 10,000; an OrderedDict's head is O(1)). The semaphore's
    own methods read them (:meth:`~tenure._core.semaphore.Semaphore.owner` and the
    read-only views), never another module.
    """

    __slots__ = ("_owners", "_rest", "count", "name", "usage")

    def __init__(
        self, name: str, limit: int, data: bytes, *, ephemeral: bool, usage: Usage | None = None
    ) -> None:
        self.name = name
        #: Its owner's usage (:mod:`tenure._core.quotas`): it counts there, with its
        #: data, from :meth:`Node.add_semaphore` to :meth:`Node.drop_semaphore`.
        self.usage = usage
        # Invariant: count == sum of owner counts <= limit.
        self._owners: Owner | dict[int, Owner] | None = None
        self.count = 0
        self._rest: SemaphoreRest | None = (
            None
            if limit == MAX_COUNT and not data and ephemeral
            else SemaphoreRest(limit, data, ephemeral)
        )

    # -- what an ephemeral mutex keeps in no field of its own -------------------------

    def _own_rest(self) -> SemaphoreRest:
        """Its :class:`SemaphoreRest`, made (with the defaults) if it had none."""
        rest = self._rest
        if rest is None:
            rest = self._rest = SemaphoreRest(MAX_COUNT, b"", True)
        return rest

    def _tidy(self) -> None:
        """Drop ``_rest`` when it says only the defaults again."""
        rest = self._rest
        if (
            rest is not None
            and rest.waiters is None
            and not rest.blocked_until
            and rest.limit == MAX_COUNT
            and not rest.data
            and rest.ephemeral
        ):
            self._rest = None

    @property
    def limit(self) -> int:
        """How many tokens it has."""
        rest = self._rest
        return MAX_COUNT if rest is None else rest.limit

    @limit.setter
    def limit(self, limit: int) -> None:
        self._own_rest().limit = limit
        self._tidy()

    @property
    def data(self) -> bytes:
        """Its data (change it with :meth:`set_data`, which counts it)."""
        rest = self._rest
        return b"" if rest is None else rest.data

    @property
    def ephemeral(self) -> bool:
        """Whether it vanishes when nobody holds or waits for it."""
        rest = self._rest
        return True if rest is None else rest.ephemeral

    @property
    def blocked_until(self) -> float:
        """Lock-delay: no grant while now < blocked_until (0.0: none)."""
        rest = self._rest
        return 0.0 if rest is None else rest.blocked_until

    @blocked_until.setter
    def blocked_until(self, when: float) -> None:
        if when or self._rest is not None:
            self._own_rest().blocked_until = when
            self._tidy()

    @property
    def _waiters(self) -> OrderedDict[int, Waiter] | None:
        # (The queue or None, for a reader; the methods here read ``_rest`` in place:
        # a property is a call in the pure build, on every acquire.)
        rest = self._rest
        return None if rest is None else rest.waiters


class SemaphoreRest:
    """What a semaphore keeps beyond an ephemeral mutex's defaults (:class:`SemaphoreFields`)."""

    __slots__ = ("blocked_until", "data", "ephemeral", "limit", "waiters")

    def __init__(self, limit: int, data: bytes, ephemeral: bool) -> None:
        self.limit = limit
        self.data = data
        self.ephemeral = ephemeral
        #: The queue (None while nobody waits): see :class:`SemaphoreFields`.
        self.waiters: OrderedDict[int, Waiter] | None = None
        # Lock-delay: no grant while now < blocked_until.
        self.blocked_until = 0.0


#: The empty view of owners or waiters (shared, read-only).
NO_HOLDERS: Mapping[int, Any] = MappingProxyType({})
