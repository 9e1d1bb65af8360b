"""Statistics per name, bounded: who waits, how long, and for what. [compiled]

Every lock service counts grants; none says *which* names its waiting goes to. The
engine tells :class:`NameStats` of each wait, grant and end as it applies them (the
handlers call it where a request queues, a grant is made, a wait ends without one,
a hold ends), with the engine's time: deterministic, the same in memory://, on a
server and on a cluster's leader, and nothing of it is state (no snapshot keeps it,
no journal logs it; a restart counts afresh from what its replay applies).

**Which names are kept.** A name is kept once a request of it queues (a grant made
at once costs nothing here: an uncontended lock is not contention), in a
space-saving sketch (Metwally et al., 2005) of at most ``capacity`` names: each kept
name counts its events, and when a new name comes to a full sketch the least-counted
eighth is pushed out, the newcomers starting from the largest count pushed out (so
a name kept is one whose events are among the most, give or take that floor: its
``error``). A million distinct contended names cost ``capacity`` entries.

**A token's share.** Each kept name is charged to the quota owner (token) whose
request brought it in; while another owner's names are kept, an owner that has
``share`` of the capacity pushes out its own least-counted names, never others'.
One token's flood of fresh names cannot push out what everyone else watches.

**Windows.** Besides its totals, a kept name keeps its counts in 10-second slots,
the last :data:`SLOTS` of them (300 s): ``top`` sums the slots of its window (60 s or
300 s, the current slot included).

**Distributions.** Wait and hold times in log buckets of milliseconds (powers of two,
1 ms to about 70 minutes; :func:`bucket_of`), since the name is kept: ``top`` shows
their 50th and 99th percentiles (a bucket's upper bound).

**Memory.** What each entry and slot costs is counted in the memory budget's
estimate (``QuotaLedger.kept_bytes``): :data:`ENTRY_BYTES` plus its name's bytes, and
:data:`SLOT_BYTES` a slot; a new name is not kept when that would pass the budget.
"""

from __future__ import annotations

import heapq
import math
from typing import Final

from tenure._core.quotas import QuotaLedger, Usage

__all__ = [
    "BUCKETS", "CONTENTION_NAMES", "CONTENTION_SERIES", "CONTENTION_SHARE", "ENTRY_BYTES",
    "SLOTS", "SLOT_BYTES", "SLOT_SECONDS", "NameEntry", "NameStats", "Slot", "bucket_of",
    "bucket_top", "owner_name",
]  # fmt: skip

#: How many names the sketch keeps, by default (``tenure serve --contention-names``).
CONTENTION_NAMES: Final = 1_000
#: How many kept names ``/metrics`` shows, by default (``tenure serve
#: --contention-series``): the most waited; the rest in one series, ``other``.
CONTENTION_SERIES: Final = 100
#: The part of the sketch one token's names may fill while others' are kept, by
#: default (``tenure serve --contention-share``).
CONTENTION_SHARE: Final = 0.25
#: A window's slot, in seconds, and how many slots a name keeps (the longest window).
SLOT_SECONDS: Final = 10.0
SLOTS: Final = 30
#: Log buckets of milliseconds: bucket 0 is under 1 ms, bucket ``b`` is [2**(b-1),
#: 2**b) ms, the last one everything from 2**(BUCKETS-2) ms (about 35 minutes) up.
BUCKETS: Final = 24
#: What a kept name costs the memory estimate besides its name's bytes: the entry
#: (27 fields), its two bucket lists (24 counts each), its places in two dicts (about
#: 820 bytes measured with ``sys.getsizeof`` on CPython 3.11; rounded up).
ENTRY_BYTES: Final = 1_000
#: What one of its 10-second slots costs (an object of 8 fields and a list place).
SLOT_BYTES: Final = 150


def owner_name(usage: Usage | None) -> str:
    """The quota owner a session's ``usage`` is charged to ("": nobody's)."""
    return "" if usage is None else usage.owner


def bucket_of(seconds: float) -> int:
    """The log bucket of a wait or hold of ``seconds`` (see :data:`BUCKETS`)."""
    ms = seconds * 1000.0
    if ms < 1.0:
        return 0
    return min(int(math.log2(ms)) + 1, BUCKETS - 1)


def bucket_top(bucket: int) -> float:
    """The upper bound of ``bucket``, in seconds (the last one's lower bound)."""
    if bucket == BUCKETS - 1:
        return 2.0 ** (bucket - 1) / 1000.0
    return 2.0**bucket / 1000.0


class Slot:
    """A kept name's counts in one 10-second slot (``number``: engine time // 10)."""

    __slots__ = ("cancelled", "grants", "hold", "losses", "number", "queued", "timeouts", "wait")

    def __init__(self, number: int) -> None:
        self.number = number
        self.queued = 0
        self.grants = 0
        self.timeouts = 0
        self.cancelled = 0
        self.losses = 0
        #: Seconds waited by the waits that ended in the slot (granted or not).
        self.wait = 0.0
        #: Seconds held by the holds that ended in the slot.
        self.hold = 0.0


class NameEntry:
    """One kept name: its counts since it was kept, its slots and distributions."""

    __slots__ = (
        "cancelled", "count", "error", "grants", "hold_buckets", "hold_max", "hold_total",
        "losses", "name", "node", "owner", "queued", "releases", "since", "slots",
        "timeouts", "wait_buckets", "wait_max", "wait_total",
    )  # fmt: skip

    def __init__(self, node: str, name: str, owner: str, count: int, since: float) -> None:
        self.node = node
        self.name = name
        #: The quota owner whose request brought it in (its share is charged).
        self.owner = owner
        #: The sketch's count (its events, from ``error`` on) and how much of it may
        #: be another name's, pushed out before it came.
        self.count = count
        self.error = count - 1
        #: When it was kept (engine time): its totals count from then.
        self.since = since
        self.queued = 0
        self.grants = 0
        self.timeouts = 0
        self.cancelled = 0
        self.losses = 0
        self.releases = 0
        self.wait_total = 0.0
        self.wait_max = 0.0
        self.hold_total = 0.0
        self.hold_max = 0.0
        self.wait_buckets = [0] * BUCKETS
        self.hold_buckets = [0] * BUCKETS
        self.slots: list[Slot] = []

    def slot(self, number: int, stats: NameStats) -> Slot:
        """Its slot ``number`` (the newest), made if it has none yet; the ones past
        the longest window let go."""
        slots = self.slots
        if slots and slots[-1].number >= number:
            return slots[-1]  # (an earlier time than its newest: counted there)
        slot = Slot(number)
        slots.append(slot)
        gone = 0
        while slots[0].number <= number - SLOTS:
            del slots[0]
            gone += 1
        stats.charge((1 - gone) * SLOT_BYTES)
        return slot

    def in_window(self, number: int, slots: int) -> list[Slot]:
        """Its slots among the ``slots`` latest up to ``number`` (the current one)."""
        return [slot for slot in self.slots if slot.number > number - slots]

    def cost(self) -> int:
        """What it costs the memory estimate now."""
        return ENTRY_BYTES + len(self.name) + len(self.slots) * SLOT_BYTES


class NameStats:
    """The kept names of every node and the server's totals (module docstring).

    ``capacity`` 0 keeps no name (the totals are still counted).
    """

    def __init__(
        self,
        ledger: QuotaLedger | None = None,
        capacity: int = CONTENTION_NAMES,
        share: float = CONTENTION_SHARE,
    ) -> None:
        self.ledger = ledger
        self.capacity = capacity
        self.share = share
        #: Bytes counted in the ledger's estimate for the entries.
        self.bytes = 0
        #: node -> name -> its entry.
        self.nodes: dict[str, dict[str, NameEntry]] = {}
        self.kept = 0
        #: owner -> how many kept names are charged to it.
        self.owners: dict[str, int] = {}
        #: The largest count pushed out so far: a newcomer starts above it.
        self.floor = 0
        #: Names pushed out, and names not kept for the memory budget, since it began.
        self.evicted = 0
        self.refused = 0
        #: Every name's, kept or not, since it began.
        self.queued = self.grants = self.timeouts = self.cancelled = 0
        self.losses = self.releases = 0
        self.wait_total = self.hold_total = 0.0

    def clear(self) -> None:
        """Begin again: every kept name and total forgotten, their bytes uncounted (the
        engine moved to another clock, :func:`~tenure._core.snapshot.resume`, where
        its windows and times would mean nothing)."""
        self.charge(-self.bytes)
        self.nodes = {}
        self.kept = 0
        self.owners = {}
        self.floor = self.evicted = self.refused = 0
        self.queued = self.grants = self.timeouts = self.cancelled = 0
        self.losses = self.releases = 0
        self.wait_total = self.hold_total = 0.0

    def resize(self, capacity: int, share: float) -> None:
        """Keep at most ``capacity`` names from now on, each owner's ``share`` of them
        (the host's settings, given once its engine is recovered: what a replay kept
        past them is pushed out now; 0 forgets every kept name, not the totals)."""
        self.capacity, self.share = capacity, share
        if capacity <= 0:
            for node in list(self.nodes):
                self.forget_node(node)
        while self.kept > capacity:
            self._push_out("\0")  # (an owner with no name: pushed out from everyone's)

    def charge(self, amount: int) -> None:
        """Count ``amount`` more bytes (fewer if negative) in the memory estimate."""
        self.bytes += amount
        ledger = self.ledger
        if ledger is not None:
            ledger.kept_bytes += amount

    def entry(self, node: str, name: str) -> NameEntry | None:
        """The kept entry of ``name`` of ``node``, if kept."""
        names = self.nodes.get(node)
        return None if names is None else names.get(name)

    # -- what the engine tells it -----------------------------------------------------

    def queued_on(self, node: str, name: str, owner: str, now: float) -> None:
        """A request of ``name`` queued (``owner``: its session's quota owner)."""
        self.queued += 1
        entry = self.entry(node, name)
        if entry is None:
            entry = self._keep(node, name, owner, now)
            if entry is None:
                return
        else:
            entry.count += 1
        entry.queued += 1
        entry.slot(int(now // SLOT_SECONDS), self).queued += 1

    def granted(self, node: str, name: str, waited: float, now: float) -> None:
        """A grant of ``name``, after ``waited`` seconds queued (0: at once)."""
        self.grants += 1
        self.wait_total += waited
        names = self.nodes.get(node)
        entry = None if names is None else names.get(name)
        if entry is None:
            return
        entry.count += 1
        entry.grants += 1
        slot = entry.slot(int(now // SLOT_SECONDS), self)
        slot.grants += 1
        self._waited(entry, slot, waited)  # (0 too: how many of its grants waited not at all)

    def wait_failed(self, node: str, name: str, waited: float, timed_out: bool, now: float) -> None:
        """A queued request of ``name`` ended without a grant after ``waited`` seconds:
        it timed out, or was cancelled (by its client, its session's end, a delete)."""
        self.wait_total += waited
        if timed_out:
            self.timeouts += 1
        else:
            self.cancelled += 1
        entry = self.entry(node, name)
        if entry is None:
            return
        entry.count += 1
        slot = entry.slot(int(now // SLOT_SECONDS), self)
        if timed_out:
            entry.timeouts += 1
            slot.timeouts += 1
        else:
            entry.cancelled += 1
            slot.cancelled += 1
        self._waited(entry, slot, waited)

    def hold_ended(self, node: str, name: str, held: float, lost: bool, now: float) -> None:
        """A hold of ``name`` ended after ``held`` seconds: released (or handed off),
        or ``lost`` (its lease or session expired, its max_hold passed, a delete)."""
        self.hold_total += held
        if lost:
            self.losses += 1
        else:
            self.releases += 1
        names = self.nodes.get(node)
        entry = None if names is None else names.get(name)
        if entry is None:
            return
        slot = entry.slot(int(now // SLOT_SECONDS), self)
        if lost:
            entry.count += 1
            entry.losses += 1
            slot.losses += 1
        else:
            entry.releases += 1
        entry.hold_total += held
        slot.hold += held
        if held > entry.hold_max:
            entry.hold_max = held
        entry.hold_buckets[bucket_of(held)] += 1

    def forget_node(self, node: str) -> None:
        """Node ``node`` was dropped: forget its kept names."""
        names = self.nodes.pop(node, None)
        if names is not None:
            for entry in names.values():
                self._drop(entry, names, pop=False)

    # -- inside -----------------------------------------------------------------------

    @staticmethod
    def _waited(entry: NameEntry, slot: Slot, waited: float) -> None:
        entry.wait_total += waited
        slot.wait += waited
        if waited > entry.wait_max:
            entry.wait_max = waited
        entry.wait_buckets[bucket_of(waited)] += 1

    def _keep(self, node: str, name: str, owner: str, now: float) -> NameEntry | None:
        """Keep ``name`` of ``node`` (pushing out the least-counted if full); None if
        it may not be kept (capacity 0, or the memory budget)."""
        capacity = self.capacity
        if capacity <= 0:
            return None
        if self.kept >= capacity:
            self._push_out(owner)
        cost = ENTRY_BYTES + len(name)
        ledger = self.ledger
        if ledger is not None and ledger.budget and ledger.estimate() + cost > ledger.budget:
            self.refused += 1
            return None
        entry = NameEntry(node, name, owner, self.floor + 1, now)
        names = self.nodes.get(node)
        if names is None:
            names = self.nodes[node] = {}
        names[name] = entry
        self.kept += 1
        self.owners[owner] = self.owners.get(owner, 0) + 1
        self.charge(cost)
        return entry

    def _push_out(self, owner: str) -> None:
        """Make room: push out the least-counted eighth of the kept names (at most
        what ``owner``'s share has left), or of ``owner``'s own if it has its share
        and others' are kept too."""
        mine = self.owners.get(owner, 0)
        allowed = max(1, int(self.capacity * self.share))
        own_only = mine >= allowed and mine < self.kept
        candidates = [
            entry
            for names in self.nodes.values()
            for entry in names.values()
            if not own_only or entry.owner == owner
        ]
        batch = max(1, len(candidates) // 8)
        if not own_only and mine < self.kept:
            # (Never more room than its share has left: others' names pushed out for
            # it are at most its share, whatever the batch. Alone, it has it all.)
            batch = max(1, min(batch, allowed - mine))
        for entry in heapq.nsmallest(batch, candidates, key=_by_count):
            if entry.count > self.floor:
                self.floor = entry.count
            names = self.nodes[entry.node]
            self._drop(entry, names, pop=True)
            if not names:
                del self.nodes[entry.node]
            self.evicted += 1

    def _drop(self, entry: NameEntry, names: dict[str, NameEntry], pop: bool) -> None:
        """Forget ``entry`` (out of ``names`` too if ``pop``), uncounted."""
        if pop:
            del names[entry.name]
        self.kept -= 1
        left = self.owners[entry.owner] - 1
        if left:
            self.owners[entry.owner] = left
        else:
            del self.owners[entry.owner]
        self.charge(-entry.cost())


def _by_count(entry: NameEntry) -> tuple[int, int]:
    """Least counted first; of equal counts, the one with the least it surely had
    (its count less its error: a newcomer's count is mostly the floor it inherited)."""
    return entry.count, entry.count - entry.error
