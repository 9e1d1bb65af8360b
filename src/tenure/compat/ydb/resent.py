"""Changes a client sends again on a new stream of its session: answered again, applied once.

YDB's SDKs send a session's unanswered requests again on each stream that re-attaches
it (docs/ydb.md). An acquire sent again restates the waiter in place, and a release,
a describe sent again change nothing more; but an update, a create or a delete applied
a second time may undo what other clients did in between: an update whose answer was
lost, sent again after another client's update, would bring its data back, and the
other's acknowledged update would be lost (the ``linearizable`` fault scenario's
register model, tools/faults/findings.md). YDB's own kesus applies it again.

So :class:`Resent` keeps, per session, the answers of its last :data:`KEPT` such
requests, and one that comes again on another stream of the session (the same kind,
``req_id`` and fields) is answered with its first answer instead. The same request on
the stream that sent it is applied again: that stream lost no answer.

In memory: a server that restarted (or a cluster's new leader) does not know what was
answered before, and applies a request sent again after it (docs/ydb.md).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final

from tenure.compat.ydb.stream import SessionStream

#: The requests whose answers are kept (their result's kind in a ``SessionResponse``).
CHANGES: Final = frozenset({"create_semaphore", "update_semaphore", "delete_semaphore"})
#: How many answers are kept per session (a client has few requests in flight).
KEPT: Final = 16


@dataclass(frozen=True, slots=True)
class _Answer:
    """A change's answer, and the request and stream it answered."""

    kind: str
    digest: bytes  # of the request's fields, req_id included
    stream: SessionStream
    response: Any  # the SessionResponse sent


class Resent:
    """The answers of each session's last changes (module docstring)."""

    def __init__(self) -> None:
        self._sessions: dict[int, OrderedDict[int, _Answer]] = {}

    def recall(self, stream: SessionStream, kind: str, request: Any) -> Any | None:
        """The first answer of ``request`` (of ``kind``) if it is a change the stream's
        session sent before on another stream; None: apply it."""
        kept = self._sessions.get(stream.session_id)
        answer = None if kept is None else kept.get(request.req_id)
        if answer is None or answer.stream is stream or answer.kind != kind:
            return None
        return answer.response if answer.digest == _digest(request) else None

    def keep(self, stream: SessionStream, kind: str, request: Any, response: Any) -> None:
        """Keep ``response``, the answer ``stream`` is sent to ``request`` (a change)."""
        if kind not in CHANGES or not stream.session_id:
            return
        kept = self._sessions.setdefault(stream.session_id, OrderedDict())
        kept.pop(request.req_id, None)
        kept[request.req_id] = _Answer(kind, _digest(request), stream, response)
        if len(kept) > KEPT:
            kept.popitem(last=False)

    def forget(self, session_id: int) -> None:
        """The session ended: its answers are not asked for again."""
        self._sessions.pop(session_id, None)

    def sessions(self) -> int:
        """How many sessions have answers kept."""
        return len(self._sessions)


def _digest(request: Any) -> bytes:
    """A request's fields, as one short value (its data may be large)."""
    return hashlib.blake2b(request.SerializeToString(deterministic=True), digest_size=16).digest()
