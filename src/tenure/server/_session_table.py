"""Which connection owns which session, and the pushes waiting for detached sessions.

docs/protocol.md section 11: a session is attached to at most one connection; its
effects go there. While it is detached they wait here, in order, and the
connection that re-attaches it receives them before the Reply to its AttachSession.

The wait is bounded by what the session holds and waits for (a detached session
cannot ask for anything new), but a server must never trust that blindly: past
``max_queued`` effects the session is reported as *overflowed* and the server ends
it (see docs/operations.md); its queue is dropped.

A repeating watch fires on every change, and only its latest firing matters: a
newer one replaces the older one still queued, at the end of the queue (where it
would have been queued had the older one never been). So the queue is a dict in
insertion order, a WatchFired keyed by twice its watch id and every other effect
by an odd number of its own (so the two never meet): a replacement is one pop and
one insertion, O(1) however many watches the session has (a scan of the queue per
firing made one change cost the square of a detached session's watches: issue 47).

A firing waits here without the state it carried (nil, "describe to learn it":
docs/protocol.md section 8). A client reads its watches' state after every
re-attach anyway (section 11: a push may have been lost), so the state would
only be read and dropped; kept, each firing of a distinct change held a
description of its own, as big as the group it lists (500 detached watchers of a
2,000-holder semaphore's owners: 96 MB that no estimate counted; now a few dozen
bytes each, within ``max_queued``: bench.micro.listing_watch).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from tenure._core import Effect, SessionEnded, WatchFired

C = TypeVar("C", bound=Hashable)

#: Effects kept for one detached session before it is ended instead.
DEFAULT_MAX_QUEUED = 10_000


class SessionTable(Generic[C]):
    """Session id -> owning connection (``C``), plus queues of undelivered effects."""

    def __init__(self, *, max_queued: int = DEFAULT_MAX_QUEUED) -> None:
        self.max_queued = max_queued
        self._owner: dict[int, C] = {}
        # A dict as an ordered set: a set of a connection's 100,000 sessions costs
        # three times the memory (sets grow fourfold).
        self._owned: dict[C, dict[int, None]] = {}
        #: Per detached session, its effects in order (module docstring: the keys).
        self._queued: dict[int, dict[int, Effect]] = {}
        #: The key of the latest effect queued that is not a WatchFired (odd ones).
        self._last_key = -1

    def owner(self, session_id: int) -> C | None:
        """The connection the session is attached to, or None."""
        return self._owner.get(session_id)

    def owned_by(self, conn: C) -> list[int]:
        """The sessions attached to ``conn``, in id order."""
        return sorted(self._owned.get(conn, ()))

    def attach(self, session_id: int, conn: C) -> list[Effect]:
        """Attach the session to ``conn`` (moving it if needed); returns its queued effects."""
        self._release(session_id)
        self._owner[session_id] = conn
        self._owned.setdefault(conn, {})[session_id] = None
        queue = self._queued.pop(session_id, None)
        return [] if queue is None else list(queue.values())

    def detach(self, session_id: int) -> None:
        """The session has no connection now: its effects will be queued."""
        self._release(session_id)

    def forget(self, session_id: int) -> None:
        """The session ended: drop its owner and whatever was queued for it."""
        self._release(session_id)
        self._queued.pop(session_id, None)

    def drop_connection(self, conn: C) -> list[int]:
        """Forget ``conn``; returns the sessions it owned (they are now detached)."""
        sessions = sorted(self._owned.pop(conn, ()))
        for session_id in sessions:
            del self._owner[session_id]
        return sessions

    def route(self, effects: Iterable[Effect]) -> tuple[list[tuple[C, Effect]], list[int]]:
        """Where each effect goes: ``(connection, effect)`` pairs in order, and overflowed sessions.

        Effects of detached sessions are queued. A SessionEnded ends its session here:
        it is delivered if the session is attached, and the session is forgotten.
        """
        out: list[tuple[C, Effect]] = []
        overflowed: list[int] = []
        for effect in effects:
            sid = effect.session_id
            conn = self._owner.get(sid)
            if isinstance(effect, SessionEnded):
                if conn is not None:
                    out.append((conn, effect))
                self.forget(sid)
            elif conn is not None:
                out.append((conn, effect))
            else:
                queue = self._queued.get(sid)
                if queue is None:
                    queue = self._queued[sid] = {}
                if isinstance(effect, WatchFired):
                    # A repeating watch fires on every change; only its latest state
                    # matters, so a busy semaphore cannot overflow a detached watcher.
                    key = effect.watch_id << 1
                    queue.pop(key, None)
                    if effect.description is not None:
                        # Kept without its state (module docstring): the client
                        # describes after its re-attach, as it must anyway.
                        effect = WatchFired(sid, effect.watch_id, effect.name)
                else:
                    key = self._last_key = self._last_key + 2
                if len(queue) >= self.max_queued:
                    if sid not in overflowed:
                        overflowed.append(sid)
                    queue.clear()
                else:
                    queue[key] = effect
        return out, overflowed

    def queued(self, session_id: int) -> int:
        """How many effects wait for the session."""
        return len(self._queued.get(session_id, ()))

    def _release(self, session_id: int) -> None:
        conn = self._owner.pop(session_id, None)
        if conn is not None:
            owned = self._owned.get(conn)
            if owned is not None:
                owned.pop(session_id, None)
                if not owned:
                    del self._owned[conn]
