"""tenure: distributed coordination for Python.

Mutexes, readers-writer locks, counting semaphores, leader election and watches, each grant with a
fencing token, over one API whatever the backend::

    import tenure

    async with tenure.connect("memory://") as client:
        await client.create_node("my-app")
        async with client.session("my-app", recovery_window=15.0) as session:
            async with session.mutex("job") as lock:
                print("holding job with fencing token", lock.token)

The synchronous face of the same API is :mod:`tenure.sync`; :mod:`tenure.fencing`
makes a database, a Redis or a file refuse writes with stale tokens.

Layer (CONTRIBUTING.md): this module may import anything.
"""

from __future__ import annotations

from tenure import errors
from tenure._core.claims import MAX_CLAIM_SECONDS
from tenure._core.top_report import NameStat, TopReport
from tenure._core.values import (
    MAX_COUNT,
    BrokenDeadlock,
    ClientIdentity,
    MutexDescription,
    NodeConfig,
    NodeDescription,
    OwnerInfo,
    RWLockDescription,
    SemaphoreDescription,
    SemaphoreSummary,
    SessionSummary,
    WaiterInfo,
)
from tenure._core.why_report import WhyHolder, WhyLink, WhyReport, WhyRoot, WhyWait, WhyWaiter
from tenure.backends import Capability, SessionTicket
from tenure.client import (
    MAX_REENTRANT_DEPTH,
    Attempt,
    AttemptObserver,
    Barrier,
    Cache,
    CacheChange,
    Claim,
    Client,
    Counter,
    Defaults,
    Election,
    EndSignal,
    Group,
    GroupMember,
    GroupView,
    HeldLocks,
    Latch,
    Leadership,
    LeaderState,
    Lease,
    Lock,
    Mutex,
    Observer,
    Partition,
    PartitionView,
    RateLimiter,
    ReadLock,
    RWLock,
    Semaphore,
    Session,
    SessionLoop,
    WriteLock,
    add_observer,
    close_default_client,
    configure,
    configured,
    connect,
    current_lock,
    default_client,
    default_session,
    locked,
    remove_observer,
)
from tenure.errors import DeadlockError

__version__ = "0.1.0"

__all__ = [
    "Attempt",
    "AttemptObserver",
    "Barrier",
    "BrokenDeadlock",
    "Cache",
    "CacheChange",
    "Capability",
    "Claim",
    "Client",
    "ClientIdentity",
    "Counter",
    "DeadlockError",
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
    "MAX_CLAIM_SECONDS",
    "MAX_COUNT",
    "MAX_REENTRANT_DEPTH",
    "Mutex",
    "MutexDescription",
    "NameStat",
    "NodeConfig",
    "NodeDescription",
    "Observer",
    "OwnerInfo",
    "Partition",
    "PartitionView",
    "RWLock",
    "RWLockDescription",
    "RateLimiter",
    "ReadLock",
    "Semaphore",
    "SemaphoreDescription",
    "SemaphoreSummary",
    "Session",
    "SessionLoop",
    "SessionSummary",
    "SessionTicket",
    "TopReport",
    "WaiterInfo",
    "WhyHolder",
    "WhyLink",
    "WhyReport",
    "WhyRoot",
    "WhyWait",
    "WhyWaiter",
    "WriteLock",
    "__version__",
    "add_observer",
    "close_default_client",
    "configure",
    "configured",
    "connect",
    "current_lock",
    "default_client",
    "default_session",
    "errors",
    "locked",
    "remove_observer",
]
