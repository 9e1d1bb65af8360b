"""One semaphore as read from etcd at one revision, and the rule that admits its requests.

A request is a key ``q/<sid>-<hold>[+]``; **arrival order is its create_revision**.
A request with a grant key ``g/<same suffix>`` is an owner, and so is one granted
by the very Txn that made it (its value says ``g``: the uncontended acquire, one
key put and one deleted, its token the key's create_revision); the others wait. A
hold has one request, or two while it waits for an upgrade: the granted one and,
created later, the one marked ``+`` (or the reverse: the marks alternate, the
old key being deleted when the new one is granted).

**Admission** (the engine's rule, :mod:`tenure._core.semaphore`): walk the
requests in arrival order, summing counts (an upgrade adds what it asks beyond the
hold it replaces); the admitted set is the longest prefix whose sum fits the
limit. The head is admitted as soon as it fits, and nothing behind a request that
does not fit, however small. A request commits its own grant once admitted.

**Admission is stable**, which is why a grant's Txn need only compare the
request's own key (and the record's, and the session's): if request E is
admitted at revision R, it stays admitted at every later revision at which its
key still exists with the same create_revision. Between R and then, the only
changes to the requests are: deletions (a release, a withdrawal, a lease that
expired), which lower every later prefix sum; in-place restates, which only lower
a count (a larger count is an upgrade, a new key); upgrades granted, which delete
the hold's old key and keep the new one, so the prefix sums at and after the new
key are unchanged and those before it drop; and new requests, which are created
with a greater revision than E's and so sit behind it. The limit never changes
while the record exists, and the grant compares the record's create_revision
(ephemeral semaphores have no record and the largest limit). So no prefix sum up
to E rises, and E still fits.

**All-or-none requests** (``lock_all``, :mod:`._set`): one Txn makes a request
key in every member's queue, so the members share one create_revision (the set's
arrival) and every queue orders the set the same way against every other
request; each member's value says ``grp``: how many members its set has (the
key is the set's old name, kept for the requests written with it). Walking a
queue, **an ungranted set member ends the admitted prefix** (it is admitted if
it fits; nothing behind it is): on the engine a member is granted only with all
the others, and nothing is granted behind a request that waits, so a member that
waits holds its queue back, whether or not it fits. Its set is granted when each
member may commit in its queue (:meth:`SemState.turn`: admitted, everything ahead
granted), and then only by its own client: the barrier lifts as its grant keys
appear, one member at a time and in the names' order (each grant its own
revision, so each its own token). The rule keeps admission stable: a request's
admission now also needs no ungranted set member ahead of it, and none can
appear there later: a key ahead of E is older than E, its ``grp`` is written when
it is made (an in-place restate is of a granted request), and a granted request
never becomes ungranted (a grant key goes only with its request key). So the
set's own admission, the AND of its members', each stable while its key exists,
is stable too: the Txn that commits it compares each member key's create_revision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from tenure._core.values import MAX_COUNT, OwnerInfo, SemaphoreDescription, WaiterInfo
from tenure.backends.etcd._keys import decode, parse_suffix
from tenure.errors import LimitExceededError, ProtocolError

__all__ = ["QueueEntry", "SemState", "too_many_waiters"]

_DELETE = 1  # mvccpb.Event.DELETE


def _entry(suffix: bytes, kv: Any) -> QueueEntry:
    try:
        value = decode(kv.value)
        sid, hold, upgrade = parse_suffix(suffix)
        created, at_once = int(kv.create_revision), bool(value.get("g"))
        at = _time(value.get("at"))
        return QueueEntry(
            suffix,
            sid,
            hold,
            upgrade,
            int(value["count"]),
            bytes(value["data"]),
            created,
            created if at_once else 0,
            at_once,
            at,
            at if at_once else None,
            int(value.get("grp", 0)),  # ("grp": the set's old name, kept for stored keys)
        )
    except (KeyError, TypeError, ValueError) as error:
        raise _foreign(kv, error) from None


def _time(value: object) -> float | None:
    """A key's ``at`` (None: written before times were kept)."""
    return float(value) if isinstance(value, int | float) else None


def grant_time(kv: Any) -> float | None:
    """When a grant key's grant was made (its value's ``at``; None if empty or foreign)."""
    try:
        return _time(decode(kv.value).get("at")) if kv.value else None
    except ValueError:
        return None


def _foreign(kv: Any, error: Exception) -> ProtocolError:
    """A key under tenure's prefix whose value tenure did not write."""
    return ProtocolError(
        f"etcd key {bytes(kv.key)!r} under tenure's prefix is not tenure's ({error!r}): "
        "another writer uses the prefix"
    )


@dataclass(slots=True)
class QueueEntry:
    """One request: whose, how many tokens, its data, and whether it is granted."""

    suffix: bytes
    sid: int
    hold: int
    upgrade: bool
    count: int
    data: bytes
    created: int  # the request key's create_revision: its place in the queue
    granted: int = 0  # the grant's revision (its fencing token), or 0
    #: Granted by the Txn that made the request (its value says so; no grant key).
    at_once: bool = False
    #: When the request was made, and when it was granted (UNIX seconds by the clock
    #: of the client that wrote the key; None if it was written before times were kept).
    at: float | None = None
    granted_at: float | None = None
    #: Of a member of an all-or-none set (module docstring): how many members the set
    #: has; 0: of no set.
    set_size: int = 0

    @property
    def place(self) -> tuple[int, int]:
        """The hold it belongs to."""
        return (self.sid, self.hold)


#: Where a claim's record has its token (after ``claim ID ``: 6 + 32 + 1 bytes), and
#: what it has there until the token is written: ``-`` (tenure.backends.etcd._claims).
_TOKEN_AT: Final = 39
_UNNUMBERED: Final = b"- "


@dataclass(slots=True)
class SemState:
    """A semaphore at one revision."""

    name: str
    revision: int
    record: int = 0  # the record's create_revision; 0: ephemeral or missing
    limit: int = MAX_COUNT
    data: bytes = b""
    entries: list[QueueEntry] = field(default_factory=list)  # in arrival order
    record_mod: int = 0  # the record's mod_revision (a compare-and-swap of its data)

    @classmethod
    def parse(cls, name: str, prefix: bytes, kvs: Any, revision: int) -> SemState:
        """The state from a Range of the semaphore's prefix ``prefix``."""
        state = cls(name, revision)
        grants: dict[bytes, Any] = {}
        for kv in kvs:
            rest = bytes(kv.key)[len(prefix) :]
            if rest == b"rec":
                state._record(kv)
            elif rest.startswith(b"q/"):
                state.entries.append(_entry(rest[2:], kv))
            elif rest.startswith(b"g/"):
                grants[rest[2:]] = kv
        for entry in state.entries:
            grant = grants.get(entry.suffix)
            if grant is not None:
                entry.granted, entry.granted_at = int(grant.create_revision), grant_time(grant)
        state.entries.sort(key=lambda e: e.created)
        return state

    def _record(self, kv: Any) -> None:
        try:
            value = decode(kv.value)
            self.record, self.limit = int(kv.create_revision), int(value["limit"])
            self.record_mod = int(kv.mod_revision)
            self.data = bytes(value["data"])
        except (KeyError, TypeError, ValueError) as error:
            raise _foreign(kv, error) from None
        data = self.data
        if data.startswith(b"claim ") and data.startswith(_UNNUMBERED, _TOKEN_AT):
            # A claim's record is written before its token is known: its token is the
            # record's create_revision (tenure.backends.etcd._claims).
            self.data = b"%s%d%s" % (data[:_TOKEN_AT], self.record, data[_TOKEN_AT + 1 :])

    def apply(self, prefix: bytes, events: Any) -> None:
        """Move the state forward by watch events of its range (in revision order).

        The events are every change to the range, with the keys' new create and
        mod revisions, so the result is exactly what a Range at the last event's
        revision would read: a waiter needs no read per change.
        """
        for event in events:
            kv = event.kv
            rest = bytes(kv.key)[len(prefix) :]
            deleted = event.type == _DELETE
            if rest == b"rec":
                if deleted:
                    self.record, self.limit, self.data = 0, MAX_COUNT, b""
                else:
                    self._record(kv)
            elif rest.startswith(b"q/"):
                entry = self.entry(rest[2:])
                if deleted:
                    if entry is not None:
                        self.entries.remove(entry)
                elif entry is not None and entry.created == int(kv.create_revision):
                    value = decode(kv.value)  # restated in place (its times kept)
                    entry.count, entry.data = int(value["count"]), bytes(value["data"])
                else:
                    if entry is not None:
                        self.entries.remove(entry)
                    self.entries.append(_entry(rest[2:], kv))  # the newest request: last
            elif rest.startswith(b"g/"):
                entry = self.entry(rest[2:])
                if entry is not None:
                    entry.granted = 0 if deleted else int(kv.create_revision)
                    entry.granted_at = None if deleted else grant_time(kv)
            self.revision = max(self.revision, int(kv.mod_revision))

    def fits_at_tail(self, count: int, replacing: QueueEntry | None = None) -> bool:
        """Whether a new request for ``count`` would be granted at once: every request
        queued now is granted and the sum of their counts and ``count`` fits (without
        the hold it ``replacing``, for an upgrade, which goes when it is granted)."""
        held = sum(e.count for e in self.entries) - (replacing.count if replacing else 0)
        return all(e.granted for e in self.entries) and held + count <= self.limit

    @property
    def exists(self) -> bool:
        """A record, or (ephemeral) a request."""
        return bool(self.record or self.entries)

    def entry(self, suffix: bytes) -> QueueEntry | None:
        """The request with key suffix ``suffix``."""
        for entry in self.entries:
            if entry.suffix == suffix:
                return entry
        return None

    def held(self, place: tuple[int, int]) -> QueueEntry | None:
        """The granted request of hold ``place``."""
        for entry in self.entries:
            if entry.granted and entry.place == place:
                return entry
        return None

    def admitted(self) -> list[QueueEntry]:
        """The longest prefix of the queue that fits the limit and has no ungranted
        set member but maybe its last (module docstring)."""
        total = 0
        counted: dict[tuple[int, int], int] = {}
        prefix: list[QueueEntry] = []
        for entry in self.entries:
            before = counted.get(entry.place, 0)  # the hold it replaces, if an upgrade
            total += entry.count - before
            if total > self.limit:
                break
            counted[entry.place] = entry.count
            prefix.append(entry)
            if entry.set_size and not entry.granted:
                break  # it waits for its other queues: nothing behind it goes first
        return prefix

    def turn(self, suffix: bytes) -> bool:
        """Whether request ``suffix`` may commit its grant now: it is admitted and every
        request ahead of it is granted already, so grants (and tokens) follow the queue.
        """
        for entry in self.admitted():
            if entry.suffix == suffix:
                return True
            if not entry.granted:
                return False
        return False

    def is_admitted(self, suffix: bytes) -> bool:
        """Whether the request ``suffix`` is in the admitted prefix."""
        return any(entry.suffix == suffix for entry in self.admitted())

    def owners(self) -> list[QueueEntry]:
        """Granted requests in grant (token) order."""
        return sorted((e for e in self.entries if e.granted), key=lambda e: e.granted)

    def waiters(self) -> list[QueueEntry]:
        """Requests not granted, in arrival order."""
        return [e for e in self.entries if not e.granted]

    def describe(self, *, owners: bool, waiters: bool) -> SemaphoreDescription:
        """The contract's description of this state."""
        if not self.exists:
            return SemaphoreDescription.missing(self.name)
        held = self.owners()
        return SemaphoreDescription(
            name=self.name,
            limit=self.limit,
            count=sum(e.count for e in held),
            data=self.data,
            ephemeral=not self.record,
            owners=tuple(
                OwnerInfo(e.sid, e.count, e.data, e.granted, since=e.granted_at) for e in held
            )
            if owners
            else (),
            waiters=tuple(WaiterInfo(e.sid, e.count, e.data, since=e.at) for e in self.waiters())
            if waiters
            else (),
        )


def too_many_waiters(limit: int, name: str) -> LimitExceededError:
    """The refusal of a request past ``max_waiters`` (``limit``) of semaphore ``name``."""
    return LimitExceededError(f"max_waiters ({limit}) reached on semaphore {name!r}")
