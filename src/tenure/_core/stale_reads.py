"""The reads a state may answer as it is, without its time moving: a standby's.

A cluster's standby holds the leader's state as of the last log entry it applied
(:mod:`tenure.server._cluster.follower`); it may answer a read from it when the client
allows some staleness (protocol version 11, ``Request.max_staleness``). Such a read
must change nothing: the standby's engine changes only by the log, or it would no
longer be the leader's. So it is answered by the command's handler alone, never by
:meth:`~tenure._core.engine.Engine.apply`, which first lets time pass up to ``now``
(rule 6: expiring sessions and waiters, which only the leader's log may do here). The
time the handler is given is the state's own (the last record's, the leader's), so
what it computes from time (a wait's age, what is left of a lease) is as of the
state it reads.

:data:`STALE_READS` are the commands that read only; a DescribeSemaphore that arms a
watch is not one (:func:`is_stale_read`). ``tests/core/test_stale_reads.py`` holds
every one of them to it: each leaves a busy state as it found it, byte for byte.

**A standby's watches** (protocol version 13). A watch is no part of the state: the
log never holds one (the leader's are its own, and its clients arm them again after a
failover). So a standby may arm watches in its own engine as the leader arms its own
(:func:`is_standby_watch`, :func:`arm_watch`: a DescribeSemaphore with a watch, a
WatchPrefix, and a CancelWatch of one): what they change is the engine's watch
tables, the session's count of its watches and the watch counter, never a node, a
session's holds or anything the log replays; and as the standby applies the
leader's records, the same handlers fire them (``tests/core/test_stale_reads.py``
holds them to it, and to firing).
"""

from __future__ import annotations

from typing import Final, TypeVar

from tenure._core import commands as c
from tenure._core.engine import HANDLERS
from tenure._core.state import EngineState
from tenure.errors import InvalidArgumentError

__all__ = [
    "STALE_READS",
    "STANDBY_WATCHES",
    "answer_read",
    "arm_watch",
    "is_stale_read",
    "is_standby_watch",
]

R = TypeVar("R")

#: The commands that only read the state (a DescribeSemaphore only without a watch).
STALE_READS: Final = frozenset(
    {
        c.DescribeNode,
        c.GetNodeAnnex,
        c.DescribeSession,
        c.DescribeSemaphore,
        c.ListNodes,
        c.ListSemaphores,
        c.ListSessions,
        c.WhyName,
        c.TopNames,
    }
)


#: The commands that arm or disarm a watch only (a DescribeSemaphore only with a watch).
STANDBY_WATCHES: Final = frozenset({c.WatchPrefix, c.CancelWatch})


def is_stale_read(command: c.Command[object]) -> bool:
    """Whether ``command`` only reads, and so may be answered by a state as it is."""
    kind = type(command)
    if kind is c.DescribeSemaphore:
        return not command.watches  # type: ignore[attr-defined]
    return kind in STALE_READS


def answer_read(state: EngineState, command: c.Command[R]) -> R:
    """``command``'s answer from ``state`` as it is, at the state's own time.

    Raises:
        InvalidArgumentError: ``command`` is not a read (:func:`is_stale_read`).
        The command's own error (NotFoundError, InvalidArgumentError, ...).
    """
    if not is_stale_read(command):
        raise InvalidArgumentError(f"{type(command).__name__} is not a read a standby answers")
    answer: R = HANDLERS[type(command)](state, command, state.now)
    return answer


def is_standby_watch(command: c.Command[object]) -> bool:
    """Whether ``command`` only arms or disarms a watch, which a standby may do in its
    own engine (module docstring)."""
    kind = type(command)
    if kind is c.DescribeSemaphore:
        return bool(command.watches)  # type: ignore[attr-defined]
    return kind in STANDBY_WATCHES


def arm_watch(state: EngineState, command: c.Command[R]) -> R:
    """``command`` (:func:`is_standby_watch`) applied to ``state`` by its handler alone,
    at the state's own time: the watch armed (the semaphore described as it is), or
    disarmed.

    Raises:
        InvalidArgumentError: ``command`` is not one (:func:`is_standby_watch`).
        The command's own error (NotFoundError, LimitExceededError, ...).
    """
    if not is_standby_watch(command):
        raise InvalidArgumentError(f"{type(command).__name__} arms no watch a standby keeps")
    answer: R = HANDLERS[type(command)](state, command, state.now)
    return answer
