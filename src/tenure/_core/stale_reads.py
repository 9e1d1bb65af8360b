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
"""

from __future__ import annotations

from typing import Final, TypeVar

from tenure._core import commands as c
from tenure._core.engine import HANDLERS
from tenure._core.state import EngineState
from tenure.errors import InvalidArgumentError

__all__ = ["STALE_READS", "answer_read", "is_stale_read"]

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
