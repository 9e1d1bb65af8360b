"""A session's state in the engine: what it holds, waits for, watches and missed. [compiled]

A session may hold a semaphore more than once: each of its holds has a number
(``hold``, chosen by its client; 0 when it keeps one, as YDB's sessions do), and is
an owner or waiter of its own (:func:`tenure._core.semaphore.holder_key`). The
session keeps, per semaphore name, the numbers of the holds it has there, so that
ending the session, or describing it, finds each without walking the semaphore.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from types import MappingProxyType
from typing import Any, Final

from tenure._core._dataclass import dataclass
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.many_holds import MANY, ManyHolds, Numbers
from tenure._core.quotas import (
    Q_DATA_BYTES,
    Q_MISSED_BYTES,
    Q_PREFIX_WATCHES,
    Q_WAITERS,
    Q_WATCHES,
    Usage,
    text_bytes,
)
from tenure._core.values import NO_IDENTITY, ClientIdentity
from tenure._core.watches import Watch

#: What :attr:`Session.missed` keeps: a queued acquire that failed, or a lost grant.
Missed = AcquireFailed | LeaseLost

#: What one kept ending costs the server's memory besides its name's and message's
#: text: the effect, its key (name, hold), its numbers, its message's string and its
#: share of the session's table (about 250 measured on the pure build: ``python -m
#: bench.micro.memory_budget``'s per-object table; rounded up, as
#: :data:`~tenure._core.quotas.OBJECT_BYTES` are).
MISSED_BYTES: Final = 300


#: The length of what a session keeps of its protection key: its SHA-256 digest.
KEY_DIGEST_BYTES: Final = 32


def digest_key(key: bytes) -> bytes:
    """What a session keeps of its protection key ``key``: its SHA-256 digest.

    The engine only compares keys (a re-attach's, a resume's), so it keeps no key: a
    snapshot, a backup or a journal read by another (a backup holds every session)
    gives nothing that takes a session back. A plain hash suffices for keys drawn at
    random (tenure's clients draw 16 or 32 bytes): nobody finds one from its digest.
    """
    return hashlib.sha256(key).digest()


def missed_bytes(effect: Missed) -> int:
    """What keeping ``effect`` in a session's :attr:`Session.missed` costs in the memory
    budget's estimate (its owner's ``missed_bytes``): the name and the message are
    counted as kept (a message names the semaphore: a 1 KiB name, twice)."""
    return MISSED_BYTES + text_bytes(effect.name) + text_bytes(effect.message)


#: The numbers of a session's holds (or waits) on one semaphore: one int, the usual
#: case (a set costs 216 bytes, and a server may keep a hundred thousand held
#: mutexes), or a set of two or more (:data:`tenure._core.many_holds.Numbers`).


@dataclass(slots=True)
class Session:
    """A session's state. ``expires_at`` is None while attached.

    ``identity`` is who runs its client, ``created_at`` when it was opened (engine
    time, as every time here: its host turns it into UNIX seconds when it shows it).

    ``held``, ``waits``, ``watches`` and ``missed`` are read-only views; change them
    with the methods. Many sessions never hold, wait or watch: their tables are made
    on first use.

    ``usage`` counts what its owner holds (:mod:`tenure._core.quotas`): the methods
    count its waits and watches (with their names' bytes) there as they change (None:
    counted nowhere); the engine counts the session itself (:meth:`counted_bytes`).

    ``key_digest`` is its protection key's digest (:func:`digest_key`), never the key.
    """

    session_id: int
    node: str
    timeout: float
    description: str
    key_digest: bytes
    seq_no: int
    expires_at: float | None = None
    identity: ClientIdentity = NO_IDENTITY
    created_at: float = 0.0
    # semaphore -> numbers of its holds there: a dict, or past MANY names a ManyHolds
    _holds: dict[str, Numbers] | ManyHolds | None = None
    _waits: dict[str, Numbers] | None = None  # semaphore -> numbers of its waiting holds
    _watches: set[int] | None = None  # armed watch ids
    _missed: dict[tuple[str, int], Missed] | None = None  # see :attr:`missed`
    # task number -> the (semaphore, hold) of each of its waits: only waits of a known
    # task (not 0), for deadlock detection (:mod:`tenure._core.deadlocks`)
    _task_waits: dict[int, list[tuple[str, int]]] | None = None
    usage: Usage | None = None
    _prefix_watches: int = 0  # how many of ``_watches`` are prefix watches

    # -- holds and waits ----------------------------------------------------------------

    @property
    def held(self) -> AbstractSet[str]:
        """Names of the semaphores it owns tokens of."""
        holds = self._holds
        if not holds:
            return _NONE
        return holds.keys() if isinstance(holds, dict) else holds

    def holds_on(self, name: str) -> Iterator[int]:
        """The numbers of its holds on ``name``."""
        return _each(None if self._holds is None else self._holds.get(name))

    def add_hold(self, name: str, hold: int = 0) -> None:
        """Its hold ``hold`` now owns tokens of ``name``."""
        holds = self._holds
        if holds is None:
            self._holds = {name: hold}
        elif not isinstance(holds, dict):
            holds.add(name, hold)
        elif name in holds:
            _add(holds, name, hold)
        elif len(holds) < MANY:
            holds[name] = hold  # (the usual case, without a call)
        else:  # (many names: kept sorted and compact from now on)
            many = self._holds = ManyHolds(holds.items())
            many.add(name, hold)

    def discard_hold(self, name: str, hold: int = 0) -> None:
        """Its hold ``hold`` no longer owns tokens of ``name``."""
        holds = self._holds
        if holds is None:
            return
        if isinstance(holds, dict):
            _discard(holds, name, hold)
        else:
            holds.discard(name, hold)
            if len(holds) < MANY // 2:  # (few again: the dict's speed back)
                self._holds = holds.table()
        if not self._holds:
            self._holds = None

    @property
    def waits(self) -> AbstractSet[str]:
        """Names of the semaphores it has a waiter in."""
        return self._waits.keys() if self._waits else _NONE

    def waits_on(self, name: str) -> Iterator[int]:
        """The numbers of its holds waiting on ``name``."""
        return _each(None if self._waits is None else self._waits.get(name))

    def wait_count(self) -> int:
        """How many of its holds wait (on every semaphore)."""
        waits = self._waits
        if not waits:
            return 0
        count = 0
        for numbers in waits.values():
            count += len(numbers) if isinstance(numbers, set) else 1
        return count

    def add_wait(self, name: str, hold: int = 0, task: int = 0) -> None:
        """Its hold ``hold`` now waits on ``name``, for its client's task ``task``."""
        waits = self._waits
        if waits is None:
            self._waits = {name: hold}
            added = True
        elif name not in waits:
            waits[name] = hold
            added = True
        else:
            added = _add(waits, name, hold)
        if added and self.usage is not None and self.usage.live:
            self.usage.add(Q_WAITERS, 1)
        if task:
            if self._task_waits is None:
                self._task_waits = {}
            self._task_waits.setdefault(task, []).append((name, hold))

    def discard_wait(self, name: str, hold: int = 0, task: int = 0) -> None:
        """Its hold ``hold`` no longer waits on ``name`` (``task``: the waiter's)."""
        waits = self._waits
        if waits is not None:
            if _discard(waits, name, hold) and self.usage is not None and self.usage.live:
                self.usage.add(Q_WAITERS, -1)
            if not waits:
                self._waits = None
        if task and self._task_waits is not None:
            places = self._task_waits.get(task)
            if places is not None:
                places.remove((name, hold))
                if not places:
                    del self._task_waits[task]
                    if not self._task_waits:
                        self._task_waits = None

    def task_waits(self, task: int) -> list[tuple[str, int]]:
        """The (semaphore, hold) of each wait of its client's task ``task`` (not 0), in
        the order they began (do not change the list)."""
        if self._task_waits is None:
            return _NO_PLACES
        return self._task_waits.get(task, _NO_PLACES)

    @property
    def waiting_tasks(self) -> Mapping[int, list[tuple[str, int]]]:
        """Every task of its client (not 0) that waits, with its waits (read-only)."""
        return self._task_waits or _NO_TASKS

    # -- endings it did not cause ---------------------------------------------------------

    @property
    def missed(self) -> Mapping[tuple[str, int], Missed]:
        """Endings of its acquires and grants that the session did not cause, by hold.

        Keyed by (semaphore name, hold number). A queued acquire that timed out or
        whose semaphore was deleted, and a grant whose lease expired or whose
        semaphore was deleted, are told by a push; a push can be lost with a
        connection, or with a server's restart. The engine keeps the latest such
        ending per hold until the session acquires that hold again, or releases it
        while holding or waiting there (so the client has seen it; a release that
        finds nothing leaves it, since its answer may be lost with its connection
        and a release sent again finds nothing either), so a client that re-attaches
        can read back what it may have missed (DescribeSession). At most the node's
        ``max_missed_per_session`` are kept, the oldest dropped first, each
        counted in the memory budget's estimate (:func:`missed_bytes`).
        """
        return self._missed or _NO_MISSED

    def note_missed(self, effect: Missed, limit: int) -> None:
        """Keep ``effect`` as the latest ending of its hold, and at most ``limit``."""
        if self._missed is None:
            self._missed = {}
        missed = self._missed
        key = (effect.name, effect.hold)
        grown = missed_bytes(effect)
        replaced = missed.pop(key, None)  # re-inserted last: the newest
        if replaced is not None:
            grown -= missed_bytes(replaced)
        missed[key] = effect
        while len(missed) > limit:  # (a node's limit may have been lowered)
            grown -= missed_bytes(missed.pop(next(iter(missed))))
        # Counted, never refused: an ending happens (a timeout, a deletion); what is
        # asked next sees it in the estimate (tenure._core.quotas).
        if self.usage is not None and self.usage.live:
            self.usage.add(Q_MISSED_BYTES, grown)

    def forget_missed(self, name: str, hold: int = 0) -> None:
        """It acted on that hold again: its client knows how the last one ended."""
        if self._missed is not None:
            forgotten = self._missed.pop((name, hold), None)
            if forgotten is not None and self.usage is not None and self.usage.live:
                self.usage.add(Q_MISSED_BYTES, -missed_bytes(forgotten))
            if not self._missed:
                self._missed = None

    def kept_missed_bytes(self) -> int:
        """What its kept endings count in its owner's ``missed_bytes`` (O(kept))."""
        return sum(map(missed_bytes, self._missed.values())) if self._missed else 0

    # -- watches ------------------------------------------------------------------------

    @property
    def watches(self) -> AbstractSet[int]:
        """Ids of its armed watches."""
        return self._watches or _NONE

    @property
    def prefix_watches(self) -> int:
        """How many of its armed watches are prefix watches."""
        return self._prefix_watches

    def add_watch(self, watch: Watch) -> None:
        """It armed ``watch`` (a prefix watch or not): counted with its name's bytes."""
        watch_id = watch.watch_id
        if self._watches is None:
            self._watches = set()
        if watch_id not in self._watches:
            self._watches.add(watch_id)
            if watch.prefix:
                self._prefix_watches += 1
            usage = self.usage
            if usage is not None and usage.live:
                usage.add(Q_WATCHES, 1)
                usage.add(Q_DATA_BYTES, text_bytes(watch.name))
                if watch.prefix:
                    usage.add(Q_PREFIX_WATCHES, 1)

    def discard_watch(self, watch: Watch) -> None:
        """``watch`` fired or was cancelled (and disarmed)."""
        watch_id = watch.watch_id
        if self._watches is not None:
            if watch_id in self._watches:
                self._watches.discard(watch_id)
                if watch.prefix:
                    self._prefix_watches -= 1
                usage = self.usage
                if usage is not None and usage.live:
                    usage.add(Q_WATCHES, -1)
                    usage.add(Q_DATA_BYTES, -text_bytes(watch.name))
                    if watch.prefix:
                        usage.add(Q_PREFIX_WATCHES, -1)
            if not self._watches:
                self._watches = None

    # -- what it counts ---------------------------------------------------------------

    def counted_bytes(self) -> int:
        """What it counts in its owner's ``data_bytes`` (:mod:`tenure._core.quotas`):
        what its client chose the size of, its description, its identity's host and
        name; and its protection key's digest (what is kept of its resume ticket's
        secret, whatever the key's length)."""
        identity = self.identity
        return (
            text_bytes(self.description)
            + text_bytes(identity.host)
            + text_bytes(identity.name)
            + len(self.key_digest)
        )


def _add(table: dict[str, Numbers], name: str, number: int) -> bool:
    """Add ``number`` under ``name``; whether it was not there."""
    numbers = table.get(name)
    if numbers is None:
        table[name] = number
        return True
    if type(numbers) is int:
        if numbers == number:
            return False
        table[name] = {numbers, number}
        return True
    assert isinstance(numbers, set)
    if number in numbers:
        return False
    numbers.add(number)
    return True


def _discard(table: dict[str, Numbers], name: str, number: int) -> bool:
    """Drop ``number`` under ``name``; whether it was there."""
    numbers = table.get(name)
    if numbers is None:
        return False
    if type(numbers) is int:
        if numbers != number:
            return False
        del table[name]
        return True
    assert isinstance(numbers, set)
    if number not in numbers:
        return False
    numbers.discard(number)
    if len(numbers) == 1:
        table[name] = next(iter(numbers))
    return True


def _each(numbers: Numbers | None) -> Iterator[int]:
    if numbers is None:
        return iter(())
    if type(numbers) is int:
        return iter((numbers,))
    assert isinstance(numbers, set)
    return iter(sorted(numbers))


_NONE: AbstractSet[Any] = frozenset()
_NO_MISSED: Mapping[tuple[str, int], Missed] = MappingProxyType({})
_NO_PLACES: list[tuple[str, int]] = []  # (shared: never changed)
_NO_TASKS: Mapping[int, list[tuple[str, int]]] = MappingProxyType({})
