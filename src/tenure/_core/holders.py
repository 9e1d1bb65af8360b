"""A semaphore's holders: owners (holds that have tokens) and waiters (queued acquires). [compiled]

Both are keyed by :func:`holder_key`: a session's numbered hold. A server may keep a
hundred thousand owners (held mutexes), so :class:`Owner` stores only what cannot be
derived (see its docstring); waiters exist only while someone waits. Besides: what a
holder's data costs its quota owner (:func:`charge_data`, :func:`forget_hold`), and
holders as a description shows them (:func:`owner_infos`, :func:`waiter_infos`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field

from tenure._core._dataclass import dataclass
from tenure._core.quotas import Q_DATA_BYTES, Q_HOLDS, Usage
from tenure._core.session import Session
from tenure._core.values import NO_IDENTITY, ClientIdentity, OwnerInfo, WaiterInfo


def holder_key(session_id: int, hold: int) -> int:
    """The key of a session's hold ``hold`` among a semaphore's owners and waiters.

    Hold 0, the usual (and only one YDB's protocol knows), is the session id itself:
    no new object per hold. Others sit above every session id (ids are below 2**64).
    """
    return session_id | hold << 64 if hold else session_id


#: The bits of a holder key that are its session id (see :func:`holder_key`).
_SESSION_BITS = (1 << 64) - 1


class OwnerRest:
    """What an owner keeps beyond the usual hold's: its data, its lease, its hand-off
    offer (see :class:`Owner`)."""

    __slots__ = ("data", "deadline", "ends", "offer", "ttl")

    def __init__(
        self, data: bytes, ttl: float | None, deadline: float | None, ends: float | None = None
    ) -> None:
        self.data = data
        #: The lease's TTL and when it runs out unless renewed (engine time); both
        #: None without a lease. With ``ends`` (a max_hold), ``deadline`` is never
        #: after it, and is set even without a TTL.
        self.ttl = ttl
        self.deadline = deadline
        #: When the grant ends whatever its session does (its max_hold, engine time:
        #: no renewal moves it); None: no bound.
        self.ends = ends
        #: The SHA-256 digest of the secret its hand-off was offered with (OfferHold),
        #: or None: not offered.
        self.offer: bytes | None = None


class Owner:
    """A session's hold on a semaphore (its hold number ``hold``).

    Memory: a server may keep a million of these (held mutexes), so an owner
    stores only what cannot be derived. ``key`` (:func:`holder_key`) carries the
    session id and the hold number, which are read from it; a grant with no data
    and no lease TTL of its own (the usual) keeps neither: ``_rest``, an
    :class:`OwnerRest`, is made only for one that has either. Seven fields, 96
    bytes compiled, where eight took 112 (and a dataclass of every field more).

    ``task`` is the client's number of the task that asked for the grant (0: not
    known: an old client, a face of another protocol, a resumed session): what
    deadlock detection reads (:mod:`tenure._core.deadlocks`).

    ``usage`` is its session's quota owner's (:mod:`tenure._core.quotas`): its data counts
    there while its semaphore keeps it (None: counted nowhere).
    """

    __slots__ = ("_rest", "count", "key", "since", "task", "token", "usage")

    def __init__(
        self,
        session_id: int,
        count: int,
        data: bytes,
        token: int,
        lease_ttl: float | None = None,
        lease_deadline: float | None = None,  # set iff lease_ttl is set
        hold: int = 0,
        since: float = 0.0,  # when the grant was made (engine time); a restate keeps it
        task: int = 0,
        usage: Usage | None = None,
        ends: float | None = None,  # its max_hold's end (engine time); None: no bound
    ) -> None:
        self.usage = usage
        #: Its :func:`holder_key` (kept: every lookup of a hold compares it; inlined:
        #: a restart makes a million owners).
        self.key = session_id | hold << 64 if hold else session_id
        self.count = count
        self.token = token
        self.since = since
        self.task = task
        self._rest: OwnerRest | None = (
            None
            if not data and lease_ttl is None and lease_deadline is None and ends is None
            else OwnerRest(data, lease_ttl, lease_deadline, ends)
        )

    @property
    def session_id(self) -> int:
        """The session holding it."""
        key = self.key
        return key if key <= _SESSION_BITS else key & _SESSION_BITS

    @property
    def hold(self) -> int:
        """Which of the session's holds it is (0: the usual)."""
        return self.key >> 64

    @property
    def data(self) -> bytes:
        """The data its holder gave with the grant."""
        rest = self._rest
        return b"" if rest is None else rest.data

    @property
    def leased(self) -> bool:
        """Whether the grant has a lease of its own (a TTL, renewed apart from its
        session, or a max_hold's end): a deadline the engine times."""
        rest = self._rest
        return rest is not None and (rest.ttl is not None or rest.deadline is not None)

    @property
    def lease_ttl(self) -> float | None:
        """The lease TTL of the grant, or None: it lasts as long as its session."""
        rest = self._rest
        return None if rest is None else rest.ttl

    @lease_ttl.setter
    def lease_ttl(self, ttl: float | None) -> None:
        self._set_lease(ttl, self.lease_deadline)

    @property
    def ends(self) -> float | None:
        """When the grant ends whatever its session does (its max_hold; engine time),
        or None: no bound. Renewals never move it; the lease's deadline is never after it."""
        rest = self._rest
        return None if rest is None else rest.ends

    @ends.setter
    def ends(self, ends: float | None) -> None:
        rest = self._rest
        if rest is not None:
            rest.ends = ends
        elif ends is not None:
            self._rest = OwnerRest(b"", None, None, ends)

    @property
    def lease_deadline(self) -> float | None:
        """When the lease runs out unless renewed (engine time); None without a lease."""
        rest = self._rest
        return None if rest is None else rest.deadline

    @lease_deadline.setter
    def lease_deadline(self, deadline: float | None) -> None:
        self._set_lease(self.lease_ttl, deadline)

    def _set_lease(self, ttl: float | None, deadline: float | None) -> None:
        rest = self._rest
        if rest is not None:  # (a renewal: the same record, restarted)
            rest.ttl, rest.deadline = ttl, deadline
            if (
                ttl is None
                and deadline is None
                and not rest.data
                and rest.ends is None
                and rest.offer is None
            ):
                self._rest = None
        elif ttl is not None or deadline is not None:
            self._rest = OwnerRest(b"", ttl, deadline)

    @property
    def offer(self) -> bytes | None:
        """The digest of the secret its hand-off was offered with (OfferHold), or None."""
        rest = self._rest
        return None if rest is None else rest.offer

    @offer.setter
    def offer(self, digest: bytes | None) -> None:
        rest = self._rest
        if rest is None:
            if digest is None:
                return
            rest = self._rest = OwnerRest(b"", None, None)
        rest.offer = digest

    def _fields(self) -> tuple[object, ...]:
        lease = (self.lease_ttl, self.lease_deadline, self.ends)
        return (
            self.key,
            self.count,
            self.data,
            self.token,
            lease,
            self.since,
            self.task,
            self.offer,
        )

    def __eq__(self, other: object) -> bool:
        if type(other) is not Owner:
            return NotImplemented
        return self._fields() == other._fields()

    # Mutable, compared by value: unhashable, as a class with __eq__ and no __hash__
    # is (no ``__hash__ = None`` here: mypyc would keep it in a field of every owner).

    def __repr__(self) -> str:
        return (
            f"Owner(session_id={self.session_id}, count={self.count}, data={self.data!r}, "
            f"token={self.token}, lease_ttl={self.lease_ttl}, "
            f"lease_deadline={self.lease_deadline}, hold={self.hold}, since={self.since}, "
            f"task={self.task}, ends={self.ends})"
        )


@dataclass(slots=True)
class Waiter:
    """A queued acquire (for the session's hold number ``hold``)."""

    session_id: int
    request_id: int
    count: int
    data: bytes
    deadline: float | None  # None: waits forever
    lease_ttl: float | None
    hold: int = 0
    #: When the request was queued (engine time).
    since: float = 0.0
    #: Its arrival number: the engine numbers queued requests 1, 2, 3... in the order
    #: they arrive (a restate in place keeps it), so a queue's are ascending.
    order: int = 0
    #: The timeout it asked for, in seconds (None: forever); ``deadline`` is when it
    #: runs out (a restate restarts both).
    timeout: float | None = None
    #: The client's number of the task that asks (0: not known); the hold it becomes
    #: keeps it (:mod:`tenure._core.deadlocks`).
    task: int = 0
    #: The max_hold it asked for, in seconds (None: the node's, if any): its grant
    #: ends that long after it is made (:attr:`Owner.ends`).
    max_hold: float | None = None
    #: Its session's owner's usage: its data counts there while it is queued
    #: (:mod:`tenure._core.quotas`; None: counted nowhere).
    usage: Usage | None = field(default=None, repr=False, compare=False)
    #: Its :func:`holder_key`.
    key: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.key = holder_key(self.session_id, self.hold)


# -- what holders cost their quota owner ----------------------------------------------


def forget_hold(owner: Owner) -> None:
    """``owner`` is no longer held: it and its data count no longer."""
    usage = owner.usage
    if usage is not None and usage.live:
        usage.add(Q_HOLDS, -1)
        if owner.data:
            usage.add(Q_DATA_BYTES, -len(owner.data))


def charge_data(usage: Usage | None, amount: int) -> None:
    """Count ``amount`` more data bytes (less if negative) against ``usage``'s owner."""
    if amount and usage is not None and usage.live:
        usage.add(Q_DATA_BYTES, amount)


# -- holders as a description shows them ------------------------------------------------


def owner_infos(owners: Iterable[Owner], sessions: Mapping[int, Session]) -> tuple[OwnerInfo, ...]:
    """``owners`` as a semaphore's description lists them, in the order given: each with
    its session's description and identity (looked up in ``sessions``) and its
    ``since`` in engine time (the host shows it in UNIX seconds)."""
    infos: list[OwnerInfo] = []
    for o in owners:
        description, identity = _who(sessions.get(o.session_id))
        infos.append(
            OwnerInfo(o.session_id, o.count, o.data, o.token, description, identity, o.since)
        )
    return tuple(infos)


def waiter_infos(
    waiters: Iterable[Waiter], sessions: Mapping[int, Session]
) -> tuple[WaiterInfo, ...]:
    """``waiters`` as a semaphore's description lists them (see :func:`owner_infos`)."""
    infos: list[WaiterInfo] = []
    for w in waiters:
        description, identity = _who(sessions.get(w.session_id))
        infos.append(WaiterInfo(w.session_id, w.count, w.data, description, identity, w.since))
    return tuple(infos)


def _who(session: Session | None) -> tuple[str, ClientIdentity]:
    """The description and identity a holder of ``session`` shows."""
    if session is None:  # (only a caller that passed no sessions)
        return "", NO_IDENTITY
    return session.description, session.identity
