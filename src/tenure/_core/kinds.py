"""Which recipe a semaphore is, read from what the recipes write into it.

Every recipe of ``tenure.client`` is a semaphore with owner data and semaphore data
(docs/recipes.md), so a semaphore's shape says what made it. :func:`classify`
reads that shape (from a description, or from the engine's own semaphore: only
counts, tokens and data are read) and answers one of:

* ``rwlock``: an ephemeral semaphore of limit ``MAX_COUNT`` whose holds and
  requests take 1 token (a reader) or all of them (a writer), at least one a
  reader's. Held or awaited by writers alone it is the same hold as a ``mutex``'s
  (``RWLock.write`` and ``Mutex.lock`` exclude each other by design), and says so.
* ``rate_limiter``: a persistent semaphore of limit 1, held by nobody, whose data
  is ``limiter RATE BURST TAT`` (:func:`tenure._core.rates.parse_bucket`).
* ``barrier``: a persistent semaphore of limit ``MAX_COUNT`` whose data is
  ``ROUND LAST`` (two decimal numbers: :mod:`tenure._core.barrier_data`), held by
  arrivals of one token each, awaited by nobody. An arrival's owner data is
  ``parties N``, which gives the parties (None where arrivals of older clients,
  whose data was ``waiting``, say nothing).
* ``claim``: a persistent semaphore of limit 1, held by nobody, whose data is a
  claim's record (``claim ID TOKEN ...``, :func:`tenure._core.claims.parse_claim`):
  its token, times, whether it was released, and (at a ``now``) how long it has left.
* ``counter``: a persistent semaphore of limit 1, held by nobody, whose data is a
  signed 64-bit integer in decimal (:mod:`tenure._core.counter_data`). A latch stores
  its count left exactly so: the store keeps nothing that tells the two apart, so
  this kind is "counter or latch".
* ``group``: a persistent semaphore whose data is ``group`` (``Group``, and a
  ``Partition``'s group): its members, read from their holds' member records as the
  recipe reads them (:func:`tenure._core.members.members_of`), the joins under way,
  its most members (the limit), and how many members take partition keys.
* ``mutex``: an ephemeral semaphore of limit ``MAX_COUNT`` every hold and request
  of which takes every token (a mutex's, or an election's: it is one).
* ``semaphore``: anything else. Data that only looks like a recipe's (an extra
  space, ``+3``, a NaN rate, a hold of 2 tokens) is a plain semaphore: nothing here
  raises on what a store holds.

Pure: no I/O, and no clock. What depends on time (a limiter's units available now)
takes ``now`` as an argument, UNIX seconds of the store's clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from tenure._core.barrier_data import PARTIES_WORD, parties_data, read_parties, read_progress
from tenure._core.claims import ClaimRecord, parse_claim
from tenure._core.counter_data import read_value
from tenure._core.members import GROUP_DATA, Hold, joining_count, members_of
from tenure._core.rates import parse_bucket
from tenure._core.values import MAX_COUNT, SemaphoreDescription
from tenure.errors import PreconditionFailedError

__all__ = [
    "PARTIES_WORD",
    "BarrierKind",
    "ClaimKind",
    "CountedHold",
    "CountedWaiter",
    "CounterKind",
    "GroupKind",
    "Kind",
    "LimiterKind",
    "LimiterLevel",
    "PlainKind",
    "RWLockKind",
    "classify",
    "classify_description",
    "parties_data",
]


class CountedHold(Hold, Protocol):
    """What :func:`classify` reads of a hold (an ``OwnerInfo`` or the engine's ``Owner``):
    what a group's members are read from (:class:`~tenure._core.members.Hold`), and the
    tokens it holds."""

    @property
    def count(self) -> int:
        """Tokens held."""


class CountedWaiter(Protocol):
    """What :func:`classify` reads of a queued request (a ``WaiterInfo``, a ``Waiter``)."""

    @property
    def count(self) -> int:
        """Tokens asked for."""


@dataclass(frozen=True, slots=True)
class PlainKind:
    """A mutex (or election) or a counting semaphore: no recipe's facts to show."""

    kind: Literal["mutex", "semaphore"]


@dataclass(frozen=True, slots=True)
class RWLockKind:
    """A readers-writer lock: holds of readers and of a writer, and requests of each."""

    readers: int
    writer: bool
    readers_waiting: int
    writers_waiting: int
    kind: Literal["rwlock"] = "rwlock"


@dataclass(frozen=True, slots=True)
class LimiterLevel:
    """A rate limiter's bucket at one moment.

    ``available``: units that may go at once; ``backlog``: seconds until every
    reservation made so far has gone (0 when units are available); ``full_in``:
    seconds until the whole burst is available again.
    """

    available: float
    backlog: float
    full_in: float


@dataclass(frozen=True, slots=True)
class LimiterKind:
    """A rate limiter: units per second, the most at once, and its TAT (UNIX seconds
    of the store's clock)."""

    rate: float
    burst: float
    tat: float
    kind: Literal["rate_limiter"] = "rate_limiter"

    def level(self, now: float) -> LimiterLevel:
        """The bucket at ``now`` (UNIX seconds of the store's clock).

        GCRA (:mod:`tenure._core.rates`): ``u`` units may go at once while
        ``max(TAT, now) + u / rate - burst / rate <= now``, so ``burst - rate *
        (TAT - now)`` units may go; past that, the last reservation goes at
        ``TAT - burst / rate``.
        """
        ahead = max(0.0, self.tat - now)
        available = max(0.0, self.burst - self.rate * ahead)
        backlog = max(0.0, ahead - self.burst / self.rate)
        return LimiterLevel(available, backlog, ahead)


@dataclass(frozen=True, slots=True)
class BarrierKind:
    """A barrier: rounds passed, the token of the last party let through, the parties
    that arrived for the next round, and how many it waits for (None: not said)."""

    rounds: int
    last: int
    arrived: int
    parties: int | None
    kind: Literal["barrier"] = "barrier"


@dataclass(frozen=True, slots=True)
class CounterKind:
    """A counter's value, or a latch's count left (stored alike: module docstring)."""

    value: int
    kind: Literal["counter"] = "counter"


@dataclass(frozen=True, slots=True)
class GroupKind:
    """A group: its members' ids in the order they joined, the joins under way, its
    most members, and how many of the members take partition keys (have a weight)."""

    members: tuple[str, ...]
    joining: int
    max_members: int
    partition_members: int
    kind: Literal["group"] = "group"


@dataclass(frozen=True, slots=True)
class ClaimKind:
    """A claim (:mod:`tenure._core.claims`): its record. Its times are UNIX seconds of
    the store's clock, as the record has them."""

    record: ClaimRecord
    kind: Literal["claim"] = "claim"

    def left(self, now: float) -> float:
        """Seconds until it ends, at ``now`` (0: ended; the store deletes it then)."""
        return max(0.0, self.record.ends_at() - now)


#: What :func:`classify` answers.
Kind = PlainKind | RWLockKind | LimiterKind | BarrierKind | CounterKind | GroupKind | ClaimKind


def classify(
    name: str,
    *,
    limit: int,
    ephemeral: bool,
    data: bytes,
    owners: Iterable[CountedHold],
    waiters: Iterable[CountedWaiter],
) -> Kind:
    """Which recipe the semaphore ``name`` is, and its facts (module docstring).

    ``owners`` in grant order and ``waiters`` in service order, as a description
    lists them; the counts of a ``rwlock`` are of those given (a caller that passes
    only the first thousand gets the counts among them).
    """
    held = list(owners)
    queued = [waiter.count for waiter in waiters]
    if ephemeral:
        return _ephemeral(limit, [owner.count for owner in held], queued)
    if data == GROUP_DATA:
        members = members_of(held)
        weighted = sum(1 for member in members.values() if member.weight is not None)
        return GroupKind(tuple(members), joining_count(held), limit, weighted)
    if limit == MAX_COUNT:
        found = _barrier(data, held, queued)
        return found if found is not None else PlainKind("semaphore")
    if limit != 1 or held or queued:
        # A limiter and a counter are never held nor awaited by their recipes.
        return PlainKind("semaphore")
    if data.startswith(b"claim "):
        try:
            return ClaimKind(parse_claim(name, data))
        except PreconditionFailedError:
            return PlainKind("semaphore")
    if data.startswith(b"limiter "):
        try:
            bucket = parse_bucket(name, data)
        except PreconditionFailedError:
            return PlainKind("semaphore")
        return LimiterKind(bucket.rate, bucket.burst, bucket.tat)
    value = read_value(data)
    if value is not None:
        return CounterKind(value)
    return PlainKind("semaphore")


def classify_description(found: SemaphoreDescription) -> Kind:
    """:func:`classify` of a description (read with owners and waiters); a semaphore
    that does not exist is a free mutex, as ``Mutex.describe`` says."""
    if not found.exists:
        return PlainKind("mutex")
    return classify(
        found.name,
        limit=found.limit,
        ephemeral=found.ephemeral,
        data=found.data,
        owners=found.owners,
        waiters=found.waiters,
    )


def _ephemeral(limit: int, held: list[int], queued: list[int]) -> Kind:
    counts = held + queued
    if limit != MAX_COUNT or not counts or any(c not in (1, MAX_COUNT) for c in counts):
        return PlainKind("semaphore")
    if all(count == MAX_COUNT for count in counts):
        return PlainKind("mutex")
    return RWLockKind(
        readers=held.count(1),
        writer=MAX_COUNT in held,
        readers_waiting=queued.count(1),
        writers_waiting=queued.count(MAX_COUNT),
    )


def _barrier(data: bytes, held: list[CountedHold], queued: list[int]) -> BarrierKind | None:
    # An arrival holds one token of MAX_COUNT, so it never queues.
    if queued or any(owner.count != 1 for owner in held):
        return None
    progress = read_progress(data)
    if progress is None:
        return None
    rounds, last = progress
    # Arrivals of this round: holds granted after the last round's end (a party let
    # through may still hold its arrival for a moment; it is not counted again).
    arrived = sum(1 for owner in held if owner.token > last)
    # Every arrival says the parties it waits for; they agree unless the barrier is
    # used with two numbers of parties at once (then, as with none, it is not said).
    said = {read_parties(owner.data) for owner in held}
    parties = said.pop() if len(said) == 1 else None
    return BarrierKind(rounds, last, arrived, parties)
