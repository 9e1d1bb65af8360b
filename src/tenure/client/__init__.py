"""The asyncio client: sessions and the recipes built on them (one file per recipe).

Layer (CONTRIBUTING.md): its modules may import each other, tenure.lowlevel,
tenure.backends.__init__, tenure.backends._base, tenure._core.values,
tenure._core.why_report, tenure._core.top_report, tenure._core.kinds,
tenure._core.members, tenure._core.rendezvous, tenure._core.claims, tenure._core.rates,
tenure._core.counter_data, tenure._core.barrier_data, tenure._core.commands and
tenure.errors; never tenure.client._session or tenure.client._session_holds.

Layer (CONTRIBUTING.md): this module may also import tenure.client._session.
"""

from __future__ import annotations

from tenure.client._barrier import Barrier
from tenure.client._cache import Cache
from tenure.client._cache_changes import CacheChange
from tenure.client._claim import Claim
from tenure.client._client import Client, SessionLoop, connect
from tenure.client._counter import Counter
from tenure.client._defaults import (
    Defaults,
    close_default_client,
    configure,
    configured,
    default_client,
    default_session,
)
from tenure.client._election import Election, LeaderState
from tenure.client._group import Group
from tenure.client._group_member import GroupMember, GroupView
from tenure.client._latch import Latch
from tenure.client._lease import Leadership, Lease, Lock, ReadLock, WriteLock
from tenure.client._lock_all import HeldLocks
from tenure.client._locked import current_lock, locked
from tenure.client._loss import EndSignal
from tenure.client._mutex import Mutex
from tenure.client._observers import (
    Attempt,
    AttemptObserver,
    Observer,
    add_observer,
    remove_observer,
)
from tenure.client._opening import Opening
from tenure.client._partition import Partition, PartitionView
from tenure.client._rate_limiter import RateLimiter
from tenure.client._reentrant import MAX_REENTRANT_DEPTH
from tenure.client._rwlock import RWLock
from tenure.client._semaphore import Semaphore
from tenure.client._session import Session

__all__ = [
    "Attempt",
    "AttemptObserver",
    "Barrier",
    "Cache",
    "CacheChange",
    "Claim",
    "Client",
    "Counter",
    "Defaults",
    "Election",
    "EndSignal",
    "Group",
    "GroupMember",
    "GroupView",
    "HeldLocks",
    "Latch",
    "LeaderState",
    "Leadership",
    "Lease",
    "Lock",
    "MAX_REENTRANT_DEPTH",
    "Mutex",
    "Observer",
    "Opening",
    "Partition",
    "PartitionView",
    "RWLock",
    "RateLimiter",
    "ReadLock",
    "Semaphore",
    "Session",
    "SessionLoop",
    "WriteLock",
    "add_observer",
    "close_default_client",
    "configure",
    "configured",
    "connect",
    "current_lock",
    "default_client",
    "default_session",
    "locked",
    "remove_observer",
]
