"""Commands the engine accepts, and the replies it gives them.

A command is a frozen value; ``Engine.apply(command, now)`` returns its reply (the
type parameter of the command) or raises a :mod:`tenure.errors` exception. Being
plain values, commands can be logged and replayed: the same commands at the same
times always produce the same state.

One module per topic, as the handlers (:mod:`tenure._core.handlers`) are: ``nodes``,
``sessions``, ``listing``, ``semaphores``, ``sets``, ``limiters``, ``claims``,
``handoffs``, ``watches``; ``base`` has :class:`Command`. Import them from here.
"""

from __future__ import annotations

from tenure._core.commands.base import Command
from tenure._core.commands.claims import (
    ClaimName,
    ReleaseClaim,
)
from tenure._core.commands.handoffs import (
    AdoptHold,
    OfferHold,
)
from tenure._core.commands.limiters import (
    RateReservation,
    ReserveUnits,
)
from tenure._core.commands.listing import (
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodePage,
    SemaphorePage,
    SessionPage,
    TopNames,
    WhyName,
)
from tenure._core.commands.nodes import (
    AlterNode,
    CreateNode,
    DescribeNode,
    DropNode,
    GetNodeAnnex,
    SetNodeAnnex,
)
from tenure._core.commands.semaphores import (
    Acquire,
    AcquireResult,
    AcquireStatus,
    CancelAcquire,
    CreateSemaphore,
    DeleteSemaphore,
    DescribeResult,
    DescribeSemaphore,
    Release,
    Renew,
    SwapSemaphoreData,
    UpdateSemaphore,
)
from tenure._core.commands.sessions import (
    MAX_DESCRIBE_SESSION_LIMIT,
    AttachSession,
    CloseSession,
    CreateSession,
    DescribeSession,
    DetachSession,
    HeldGrant,
    KillSession,
    QueuedAcquire,
    ResumeSession,
    SessionInfo,
    SessionState,
)
from tenure._core.commands.sets import (
    AcquireAll,
    AcquireAllResult,
)
from tenure._core.commands.watches import (
    CancelWatch,
    WatchArmed,
    WatchPrefix,
)

__all__ = [
    "Acquire",
    "AcquireAll",
    "AcquireAllResult",
    "AcquireResult",
    "AcquireStatus",
    "AdoptHold",
    "AlterNode",
    "AttachSession",
    "CancelAcquire",
    "CancelWatch",
    "ClaimName",
    "CloseSession",
    "Command",
    "CreateNode",
    "CreateSemaphore",
    "CreateSession",
    "DeleteSemaphore",
    "DescribeNode",
    "DescribeResult",
    "DescribeSemaphore",
    "DescribeSession",
    "DetachSession",
    "DropNode",
    "GetNodeAnnex",
    "HeldGrant",
    "KillSession",
    "ListNodes",
    "ListSemaphores",
    "ListSessions",
    "MAX_DESCRIBE_SESSION_LIMIT",
    "NodePage",
    "OfferHold",
    "QueuedAcquire",
    "RateReservation",
    "Release",
    "ReleaseClaim",
    "Renew",
    "ReserveUnits",
    "ResumeSession",
    "SemaphorePage",
    "SessionInfo",
    "SessionPage",
    "TopNames",
    "WhyName",
    "SessionState",
    "SetNodeAnnex",
    "SwapSemaphoreData",
    "UpdateSemaphore",
    "WatchArmed",
    "WatchPrefix",
]
