"""A member's lease in etcd, and the last moment it may believe it still holds it.

The member's election key and record live on this lease; the etcd client's
keepalive stream (:class:`~tenure._etcd.streams.KeepAlive`) renews it at a
third of its TTL. etcd ends a lease no sooner than its TTL after the renewal it
last *processed*, which came after our request was *sent*: so from the send time
of the last renewal etcd answered, the lease holds for at least the TTL. A leader
stops serving before that (:meth:`LeaseKeeper.deadline`), less a margin for clocks
that run at slightly different rates (:data:`DRIFT`) and a constant for the
scheduling of the step down itself (:data:`MARGIN`). The fence on every append
does not depend on any of this; the deadline is what keeps a paused or cut-off
leader from answering reads.
"""

from __future__ import annotations

import asyncio
from typing import Final

__all__ = ["DRIFT", "MARGIN", "LeaseKeeper"]

#: How much faster this machine's clock may run than etcd's leader's (2%).
DRIFT: Final = 0.02
#: Seconds kept in hand before the lease could end: the step down must be done by then.
MARGIN: Final = 0.25


class LeaseKeeper:
    """One lease, renewed by the keepalive stream (a
    :class:`~tenure._etcd.streams.Renewable`)."""

    def __init__(self, lease_id: int, ttl: int, granted_at: float) -> None:
        """``granted_at``: the loop time the grant request was sent."""
        self.lease_id = lease_id
        self.ttl = ttl
        #: The send time of the last request etcd answered by renewing the lease.
        self.confirmed = granted_at
        #: Set once etcd says the lease is gone (it ran out, or was revoked).
        self.lost = asyncio.Event()

    def renewed(self, sent_at: float) -> None:
        """etcd renewed the lease in answer to a request sent at ``sent_at``."""
        self.confirmed = max(self.confirmed, sent_at)

    def lease_gone(self) -> None:
        """etcd answered that the lease does not exist any more."""
        self.lost.set()

    def reconnected(self) -> None:
        """A new keepalive stream (after a failover): renewals go on; nothing to redo."""

    def deadline(self) -> float:
        """The loop time until which this member may act as the lease's holder."""
        if self.lost.is_set():
            return float("-inf")
        return self.confirmed + self.ttl * (1 - DRIFT) - MARGIN
