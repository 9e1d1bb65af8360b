"""One ``CoordinationService/Session`` stream: a connection to the outboxes, and what
it waits for.

YDB delivers the outcome of a request only on the stream that sent it: a client
that reconnects sends its unanswered requests again, and results of the old
stream's are never sent (YDB's kesus drops them). So what a stream waits for (its
queued acquires, its armed watches) is the stream's, here, and is forgotten with it;
the engine's session, with its holds and queued acquires, goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenure.compat.ydb.pipe import Pipe
from tenure.server.plug import Token


@dataclass(slots=True)
class QueuedAcquire:
    """An acquire this stream sent that waits in the semaphore's queue."""

    request_id: int  # the engine's (unique in this server process)
    req_id: int  # the client's, echoed in the result


@dataclass(slots=True)
class ArmedWatch:
    """A watch a describe of this stream armed, and what it saw then.

    YDB reports what changed (data, owners); the engine reports the state after the
    change, so the state before is kept to compare.
    """

    watch_id: int
    req_id: int
    data: bytes
    owners: tuple[tuple[int, int, bytes], ...]  # (session, count, data) of each owner


@dataclass(eq=False, slots=True)
class SessionStream:
    """One Session call (a :class:`~tenure.server._net.outbox.Connection` to the outboxes)."""

    peer: str
    token: Token | None  # who the call acts as (None: anonymous, no auth file)
    writer: Pipe = field(default_factory=Pipe)
    outbox: list[bytes] = field(default_factory=list)
    closing: bool = False  # close once the outbox is written
    session_id: int = 0  # the session it has started or attached (0: none yet)
    node: str = ""
    acquires: dict[str, QueuedAcquire] = field(default_factory=dict)
    watches: dict[str, ArmedWatch] = field(default_factory=dict)
    heard: bool = True  # a message came since the server's last ping
    last_heard: float = 0.0  # loop time of the client's latest message
    pinger: Any = None  # the ping timer (a TimerHandle of the host's clock)

    @property
    def started(self) -> bool:
        """Whether the stream has a session (SessionStarted was sent)."""
        return self.session_id != 0
