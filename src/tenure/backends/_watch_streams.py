"""What a watch gives its consumer: the contract's streams of a semaphore's states and
of a prefix's news.

Part of the backend contract (re-exported by :mod:`tenure.backends._base` and
:mod:`tenure.backends`); a :class:`~tenure.backends._base.BackendSession`'s
``watch_semaphore`` returns a :class:`WatchStream`, its ``watch_prefix`` a
:class:`PrefixWatchStream`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Self

from tenure._core.values import SemaphoreDescription

__all__ = ["PrefixChange", "PrefixNews", "PrefixReset", "PrefixWatchStream", "WatchStream"]


class WatchStream(Protocol):
    """The states of one watched semaphore, as an async iterator.

    The first item is the state when the watch was armed (``exists=False`` if the
    semaphore does not exist); each next one is the *latest* state after a watched
    change: a consumer that is slow skips states, it never gets a queue of stale
    ones. An item may equal the one before (after a reconnect, say). The iteration
    ends by raising the session's loss error if the session is lost.
    """

    def __aiter__(self) -> Self:
        """The stream itself."""

    async def __anext__(self) -> SemaphoreDescription:
        """Wait for the next state."""

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""


@dataclass(frozen=True, slots=True)
class PrefixChange:
    """News of a prefix watch: the semaphore ``name`` (under the prefix) changed.

    ``description`` is the state the change left, listed as watched (``exists``
    false: it was deleted), where the store pushes states (the engine's); None where
    the store can only say *that* it changed: read it back
    (:meth:`CoreSession.describe_semaphore`), which gives the latest state.
    """

    name: str
    description: SemaphoreDescription | None = None


@dataclass(frozen=True, slots=True)
class PrefixReset:
    """News of a prefix watch: changes may have been missed (a re-attach after a lost
    connection, a restarted server, a gap in the store's pushes, a compaction, a
    consumer too far behind). List the prefix again: the watch was armed again
    before this was yielded, so every change after it is told."""


#: One item of a :class:`PrefixWatchStream`.
PrefixNews = PrefixChange | PrefixReset


class PrefixWatchStream(Protocol):
    """What a prefix watch tells, as an async iterator of :data:`PrefixNews`.

    Nothing is yielded for the state when it was armed (list the prefix after
    :meth:`PrefixWatch.watch_prefix` returns); then a :class:`PrefixChange` for
    every change, made after it was armed, of any semaphore whose name starts with
    the prefix: its creation, its data, owners or waiters (as watched) and its
    deletion. A name outside the prefix is never told. News coalesces per name: a
    consumer that is busy finds one item per changed name, with the latest state
    pushed, never a queue of stale ones (nor a promise of every intermediate state).
    An item may tell of a change that left what is watched as it was (after a
    reconnect, say). A :class:`PrefixReset` replaces what may have been missed,
    pending items included. The iteration ends by raising the session's loss error
    if the session is lost.
    """

    def __aiter__(self) -> Self:
        """The stream itself."""

    async def __anext__(self) -> PrefixNews:
        """Wait for the next news."""

    def pending(self) -> frozenset[str]:
        """The names whose news is waiting to be taken. A consumer that has just listed
        the prefix reads these back rather than trust their pushed states: one pushed
        while it listed may be older than what its listing read."""

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""
