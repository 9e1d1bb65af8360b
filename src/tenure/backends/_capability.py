"""What a backend promises beyond the contract's core: :class:`Capability`.

Part of the backend contract (re-exported by :mod:`tenure.backends._base` and
:mod:`tenure.backends`); its own module so that the abilities
(:mod:`tenure.backends._abilities`), which the contract's session is made of, can
name theirs; and :func:`refuse_long_hold`, what a backend without
:attr:`Capability.LONG_HOLDS` says of a node's ``long_hold``.
"""

from __future__ import annotations

import enum

from tenure.errors import UnsupportedError

__all__ = ["Capability", "refuse_long_hold"]


class Capability(enum.Enum):
    """What a backend promises beyond the contract's core; callers may require them.

    Some are promises about the core's own members (tokens, FIFO, watch, durable,
    replicated, lock-delay); the others are *abilities*, each a small protocol its
    sessions implement (:data:`tenure.backends._abilities.ABILITIES`).

    A backend declares a capability only if it keeps the promise in every case the
    conformance kit can produce; one it lacks is refused by ``connect(require=...)``,
    never silently weakened.
    """

    #: Every grant of a node carries a token strictly greater than every earlier
    #: grant's in that node, across restarts of the backend.
    FENCING_TOKENS = "fencing_tokens"
    #: Waiters of a semaphore are served in arrival order; none overtakes the head.
    FIFO = "fifo"
    #: Watched changes are pushed as they happen, not found by polling.
    WATCH = "watch"
    #: An acknowledged change survives a restart of the backend.
    DURABLE = "durable"
    #: An acknowledged grant survives the loss of any one server of the backend.
    REPLICATED = "replicated"
    #: A session outlives a lost connection for its recovery window, and re-attaches.
    SESSION_RECOVERY = "session_recovery"
    #: A grant may carry a time-to-live of its own that its holder renews.
    LEASE_TTL = "lease_ttl"
    #: A node's ``lock_delay``: after a holder *failed* (its session or lease
    #: expired), nobody gets its tokens for that long. Without it, a node with a
    #: non-zero lock_delay is refused.
    LOCK_DELAY = "lock_delay"
    #: Several semaphores are acquired all or none, in one step, and a request for
    #: several waits in all their queues with one arrival (``session.lock_all``):
    #: requests for overlapping names in any order never deadlock.
    ALL_OR_NONE = "all_or_none"
    #: A session watches every semaphore under a name prefix, those made later too
    #: (:meth:`PrefixWatch.watch_prefix`): creations, changes and deletions are
    #: pushed as they happen, never found by polling.
    PREFIX_WATCH = "prefix_watch"
    #: An acquire that would close a cycle of tasks waiting on each other, none of
    #: which could ever go on (a deadlock), fails at once with DeadlockError naming
    #: the cycle; the others keep waiting (docs/recipes.md, "Deadlock detection").
    #: Without it such acquires wait as they always did (until their timeouts):
    #: ``connect(url, require=[Capability.DEADLOCK_DETECTION])`` insists on it.
    DEADLOCK_DETECTION = "deadlock_detection"
    #: Claims of a name for a slot (``session.claim``, :mod:`tenure._core.claims`):
    #: at most one at a time, held for at least ``at_least`` and at most ``at_most``
    #: seconds of the store's clock, ended by the store itself (not with a session),
    #: released by id by anyone.
    CLAIMS = "claims"
    #: A rate limiter's units are reserved by the store in one call
    #: (:meth:`RateReservations.reserve_units`, :mod:`tenure._core.rates`), on the
    #: store's clock. Without it (``etcd://``, which has no clock a transaction can
    #: read), ``session.rate_limiter`` reserves them over the core (a read, then a
    #: compare-and-set of the limiter's data), on the clients' clocks
    #: (``tenure.client._rates_over_core``): the same answers.
    RATE_RESERVATION = "rate_reservation"
    #: A hold handed to another session, of this client or any other
    #: (:meth:`Handoffs.offer_hold`, :meth:`Handoffs.adopt_hold`; ``lease.handoff()``
    #: and ``session.adopt()``): in one step the offering session's hold ends (its
    #: lease sees the loss) and the adopter holds the same count and data under a new,
    #: strictly greater fencing token; a hand-off adopts once, and never a hold that
    #: ended (docs/recipes.md, "Handing a lease to another process").
    HANDOFF = "handoff"
    #: A grant may be bounded: ``acquire(..., max_hold=S)`` (and a node's
    #: ``max_hold``, its default) ends it S seconds after its grant on the store's
    #: clock, whatever its session does: renewals and keep-alives do not extend it
    #: (:class:`~tenure.backends._abilities.MaxHolds`). Its holder sees the usual
    #: loss (LeaseLostError; work under ``async with`` cancelled), and its waiters
    #: are served as after any expiry, with greater tokens. Fractions of a second
    #: are kept. Without it, ``max_hold`` is refused with UnsupportedError, and so
    #: is a node's ``max_hold`` setting (``etcd://``: a leader change renews etcd's
    #: leases to their full TTL, so no etcd lease can promise a grant's end).
    MAX_HOLD = "max_hold"
    #: The store knows what each holder waits for: ``client.why(node, name)`` (and
    #: ``tenure why``) shows each holder's own waits, the chain of holders that wait
    #: across names, and its roots (:meth:`~tenure.backends._base.WaitChains.why`).
    #: Without it the answer is made from a describe of the name: its holders and
    #: waiters, with what a holder waits for, the chain and the roots left unknown.
    WAIT_CHAINS = "wait_chains"
    #: The store keeps statistics per name (waits, grants, timeouts, losses, hold
    #: times) and answers ``client.top()`` (and ``tenure top``): the most contended
    #: names over the last 60 or 300 seconds
    #: (:meth:`~tenure.backends._base.NameStatistics.top`). Without it ``top`` raises
    #: UnsupportedError: a store that only keeps who holds what cannot say who waited.
    NAME_STATS = "name_stats"
    #: The store tells of long holds: a hold held a node's ``long_hold`` seconds or
    #: longer (or the server's ``--long-hold-seconds``, for a node that sets none) is
    #: told of once, in the server's log and audit log and ``tenure_long_holds_total``
    #: (docs/operations.md, "Who blocks whom"); a node's ``long_hold`` of 0 tells of
    #: none of its holds. Only a tenure server has a log and an audit log to tell in:
    #: without it, a node created or altered with ``long_hold`` set is refused with
    #: UnsupportedError (:func:`refuse_long_hold`).
    LONG_HOLDS = "long_holds"


def refuse_long_hold(scheme: str, long_hold: object) -> None:
    """UnsupportedError if a node's ``long_hold`` is set (not None) on a backend of
    ``scheme`` (``memory``, ``etcd``...), which lacks :attr:`Capability.LONG_HOLDS`."""
    if long_hold is not None:
        raise UnsupportedError(
            f"{scheme}:// cannot tell of long holds (long_hold={long_hold!r}): it has no "
            "server log or audit log to tell in; a node's long_hold needs a tenure "
            "server (the capability long_holds)"
        )
