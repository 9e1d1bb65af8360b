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
    common shapes cost no container of their own, and a held mutex is three fields
    (64 bytes compiled, where five took 80). ``_owners`` is None (nobody holds), the
    one Owner (the usual case: a held mutex), or a dict by holder key (two or more,
    in grant order). ``_rest`` is what an ephemeral mutex never changes (its limit
    MAX_COUNT, no data), its queue (None while nobody waits), its lock-delay, its
    tokens held while two or more hold, and its quota owner's usage, kept in a
    :class:`SemaphoreRest` made only for a semaphore that differs (a created one, one
    with waiters, a lock-delay or two holders or more); the others keep their usage
    itself in ``_rest`` (a Usage, or None: counted nowhere). ``count`` is then read
    from the one owner (or 0), no field of its own. The queue is an OrderedDict
    by holder key in service order (a plain dict's first entry is found past every
    slot emptied at its front: serving a queue of n waiters in one step cost n**2
    / 2 of those, 0.3 s for 10,000; an OrderedDict's head is O(1)). The semaphore's
    own methods read them (:meth:`~tenure._core.semaphore.Semaphore.owner` and the
    read-only views), never another module.
    """

    __slots__ = ("_owners", "_rest", "name")

    def __init__(
        self, name: str, limit: int, data: bytes, *, ephemeral: bool, usage: Usage | None = None
    ) -> None:
        self.name = name
        # Invariant: count == sum of owner counts <= limit.
        self._owners: Owner | dict[int, Owner] | None = None
        #: A :class:`SemaphoreRest`, or (an ephemeral mutex's defaults) its owner's
        #: usage (:mod:`tenure._core.quotas`): it counts there, with its data, from
        #: :meth:`Node.add_semaphore` to :meth:`Node.drop_semaphore`.
        self._rest: SemaphoreRest | Usage | None = (
            usage
            if limit == MAX_COUNT and not data and ephemeral
            else SemaphoreRest(limit, data, ephemeral, usage)
        )

    # -- what an ephemeral mutex keeps in no field of its own -------------------------

    def _own_rest(self) -> SemaphoreRest:
        """Its :class:`SemaphoreRest`, made (with the defaults) if it had none."""
        rest = self._rest
        if not isinstance(rest, SemaphoreRest):
            rest = self._rest = SemaphoreRest(MAX_COUNT, b"", True, rest)
        return rest

    def _tidy(self) -> None:
        """Drop the :class:`SemaphoreRest` (keeping its usage) when it says only the
        defaults again."""
        rest = self._rest
        if (
            isinstance(rest, SemaphoreRest)
            and rest.waiters is None
            and not rest.blocked_until
            and rest.limit == MAX_COUNT
            and not rest.data
            and rest.ephemeral
            and type(self._owners) is not dict
        ):
            self._rest = rest.usage

    @property
    def count(self) -> int:
        """How many tokens its owners hold (the one owner's; a rest's while two or more)."""
        owners = self._owners
        if owners is None:
            return 0
        if type(owners) is Owner:
            return owners.count
        rest = self._rest
        assert isinstance(rest, SemaphoreRest)  # (two owners or more keep one)
        return rest.count

    @property
    def usage(self) -> Usage | None:
        """Its owner's usage (:mod:`tenure._core.quotas`; None: counted nowhere)."""
        rest = self._rest
        return rest.usage if isinstance(rest, SemaphoreRest) else rest

    @usage.setter
    def usage(self, usage: Usage | None) -> None:
        rest = self._rest
        if isinstance(rest, SemaphoreRest):
            rest.usage = usage
        else:
            self._rest = usage

    @property
    def limit(self) -> int:
        """How many tokens it has."""
        rest = self._rest
        return rest.limit if isinstance(rest, SemaphoreRest) else MAX_COUNT

    @limit.setter
    def limit(self, limit: int) -> None:
        self._own_rest().limit = limit
        self._tidy()

    @property
    def data(self) -> bytes:
        """Its data (change it with :meth:`set_data`, which counts it)."""
        rest = self._rest
        return rest.data if isinstance(rest, SemaphoreRest) else b""

    @property
    def ephemeral(self) -> bool:
        """Whether it vanishes when nobody holds or waits for it."""
        rest = self._rest
        return rest.ephemeral if isinstance(rest, SemaphoreRest) else True

    @property
    def blocked_until(self) -> float:
        """Lock-delay: no grant while now < blocked_until (0.0: none)."""
        rest = self._rest
        return rest.blocked_until if isinstance(rest, SemaphoreRest) else 0.0

    @blocked_until.setter
    def blocked_until(self, when: float) -> None:
        if when or isinstance(self._rest, SemaphoreRest):
            self._own_rest().blocked_until = when
            self._tidy()

    @property
    def _waiters(self) -> OrderedDict[int, Waiter] | None:
        # (The queue or None, for a reader; the methods here read ``_rest`` in place:
        # a property is a call in the pure build, on every acquire.)
        rest = self._rest
        return rest.waiters if isinstance(rest, SemaphoreRest) else None


class SemaphoreRest:
    """What a semaphore keeps beyond an ephemeral mutex's defaults (:class:`SemaphoreFields`)."""

    __slots__ = ("blocked_until", "count", "data", "ephemeral", "limit", "usage", "waiters")

    def __init__(self, limit: int, data: bytes, ephemeral: bool, usage: Usage | None) -> None:
        self.limit = limit
        self.data = data
        self.ephemeral = ephemeral
        #: The queue (None while nobody waits): see :class:`SemaphoreFields`.
        self.waiters: OrderedDict[int, Waiter] | None = None
        # Lock-delay: no grant while now < blocked_until.
        self.blocked_until = 0.0
        #: The tokens its owners hold, while two or more hold (the one owner's count
        #: is read from it: :attr:`SemaphoreFields.count`).
        self.count = 0
        #: Its owner's usage (see :attr:`SemaphoreFields.usage`).
        self.usage = usage


#: The empty view of owners or waiters (shared, read-only).
NO_HOLDERS: Mapping[int, Any] = MappingProxyType({})
