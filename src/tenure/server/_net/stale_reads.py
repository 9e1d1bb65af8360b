"""A cluster standby's answers to reads that allow some staleness (protocol version 11).

A standby's state is the leader's as of the last log entry it applied
(:mod:`tenure.server._cluster.follower`). A Request that carries ``max_staleness``
and whose command only reads (:func:`tenure._core.stale_reads.is_stale_read`) is
answered here from that state, once the standby has confirmed that it holds
everything etcd had committed ``max_staleness`` seconds before the request was read,
and at least the log entry ``min_index`` (:class:`tenure.server._role.Fresh`, the
role's: the ReadIndex rule of :mod:`tenure.server._cluster.freshness`). The Reply
carries ``index``, the last entry the state held, which the client sends back as
``min_index`` so that it never reads older than it already did, whichever standby it
asks next. A standby that cannot confirm within ``--stale-read-wait`` seconds answers
``UNAVAILABLE`` (the client asks the leader).

What a leader checks of a read is checked here too, against the standby's state: the
token's nodes (the gate, before) and its ``requests_per_second``; a session named by
the read must be the token's own (without an auth file, any session: no session is
attached to a standby's connections); a token's node listing shows only its nodes; a
blocking chain hides the nodes the token may not read. Since version 13 a watch is
armed here too, as a read is answered (:mod:`tenure.server._net.standby_watches`:
a DescribeSemaphore with a watch, a WatchPrefix; a CancelWatch of one is answered at
once). A read is answered in a task,
and the connection's later requests are served once it is answered (``Conn.answering``;
its Pings meanwhile), so that its answers keep their order.

Layer (CONTRIBUTING.md): this module may also import tenure._runtime.host and
tenure.server._observe.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable

from tenure._core.commands import (
    CancelWatch,
    DescribeResult,
    ListNodes,
    NodePage,
    SessionPage,
    WhyName,
)
from tenure._core.engine import DEFAULT_STEP_BUDGET
from tenure._core.handlers.listing import visible_node_slice
from tenure._core.stale_reads import answer_read, is_standby_watch
from tenure._core.stamps import stamp_reply
from tenure._core.values import NodeDescription
from tenure._protocol import Reply, Request, State
from tenure._runtime.host import Host
from tenure.errors import ErrorCode, NotLeaderError, TenureError, code_of
from tenure.server._net.cells import wrong_cell
from tenure.server._net.gate import Conn, Gate
from tenure.server._net.outbox import Outboxes
from tenure.server._net.standby_watches import StandbyWatches
from tenure.server._net.why_addresses import with_addresses
from tenure.server._observe import ServerObserver

__all__ = ["StaleReads"]

log = logging.getLogger("tenure.server")

#: Fail ``request`` of ``conn`` with ``code`` and the reason (the face's own Failure).
Fail = Callable[[Conn, Request, ErrorCode, str], None]


class StaleReads:
    """Answers a standby's reads that allow some staleness (module docstring)."""

    def __init__(
        self,
        host: Host,
        gate: Gate,
        out: Outboxes,
        owner: Callable[[int], object],
        fail: Fail,
        wait: float,
        observer: ServerObserver | None = None,
    ) -> None:
        """``owner(session_id)``: who holds a session attached here (for a chain's
        addresses); ``fail``: the face's Failure (counted there); ``wait``:
        ``--stale-read-wait``; ``observer``: told of each read answered."""
        self.host = host
        self.observer = observer
        self.gate = gate
        self.out = out
        self.owner = owner
        self.fail = fail
        self.wait = wait
        #: The reads being answered (kept until each ends).
        self.tasks: set[asyncio.Task[None]] = set()
        #: The watches armed here, and where each fires.
        self.watches = StandbyWatches(host, gate, out, wait)

    def answer(self, conn: Conn, request: Request) -> None:
        """Answer ``request`` (a read with ``max_staleness``, on a standby) from this
        server's state once it is fresh enough; ``conn``'s later frames after it.

        When the state is already fresh enough, it is answered now, in this turn of the
        loop (most reads under load: a confirmation serves every read of its bound
        that follows it); else in a task that waits for a confirmation."""
        fresh, staleness = self.gate.role.freshness, request.max_staleness
        if (
            fresh is not None
            and staleness is not None
            and 0 <= staleness < math.inf  # (else refused, by the task)
            and (type(request.command) is CancelWatch or fresh.holds(staleness, request.min_index))
            and _token_listing(conn, request) is None
        ):
            try:
                if conn.token is not None:  # (its rate: one per request, at its door)
                    self.host.admit_request(conn.token.name)
                value = self._read(conn, request, staleness)
            except Exception as error:  # (a refusal, or a bug: told as the task tells it)
                self._failed(conn, request, error)
                return
            self._reply(conn, request, value, fresh.applied)
            return
        task = asyncio.get_running_loop().create_task(self._answered(conn, request))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        conn.answering = task

    def cancel(self) -> None:
        """Give up the reads being answered and the watches armed (the server stops:
        their connections close, and their clients ask another member)."""
        for task in list(self.tasks):
            task.cancel()
        self.watches.end()

    async def _answered(self, conn: Conn, request: Request) -> None:
        try:
            await self._answer(conn, request)
        finally:
            conn.answering = None

    async def _answer(self, conn: Conn, request: Request) -> None:
        staleness = request.max_staleness
        if staleness is None or not math.isfinite(staleness) or staleness < 0:
            why = f"max_staleness must be 0 or more seconds, finite (got {staleness})"
            self.fail(conn, request, ErrorCode.INVALID_ARGUMENT, why)
            return
        role = self.gate.role
        fresh = role.freshness
        if fresh is None:  # (no longer a standby: the leader answers)
            standby = NotLeaderError.pointing_to(role.leader(), "this server no longer follows")
            self.fail(conn, request, ErrorCode.NOT_LEADER, str(standby))
            return
        try:
            if conn.token is not None:  # (its rate: one per request, at its door)
                self.host.admit_request(conn.token.name)
            if type(request.command) is not CancelWatch:  # (disarming needs no freshness)
                await fresh.within(staleness, request.min_index, timeout=self.wait)
            if _gone(conn):
                return  # (nobody to answer: its codec, closed, would refuse it)
            value: object
            listing = _token_listing(conn, request)
            if listing is not None:
                value = await self._visible_nodes(*listing)
            else:
                value = self._read(conn, request, staleness)
        except Exception as error:
            self._failed(conn, request, error)
            return
        self._reply(conn, request, value, fresh.applied)

    def _failed(self, conn: Conn, request: Request, error: Exception) -> None:
        """Tell ``conn`` why ``request`` was not answered: a refusal as its code says,
        anything else (a bug, or etcd's answer unreadable) as UNAVAILABLE (the client
        asks another member; the server serves on)."""
        if _gone(conn):
            return
        if isinstance(error, TenureError):  # (a node another cell serves: sent there)
            told = wrong_cell(self.gate.role.places, self.host, request.command, error)
            self.fail(conn, request, code_of(told), str(told))
            return
        log.error("a read from this standby failed unexpectedly", exc_info=error)
        why = "this standby could not answer the read (its log says why)"
        self.fail(conn, request, ErrorCode.UNAVAILABLE, why)

    def _reply(self, conn: Conn, request: Request, value: object, applied: int) -> None:
        """Send ``value`` as ``request``'s answer, with the index the state held (None:
        answered already, or nobody left to answer)."""
        if value is None or _gone(conn):
            return
        self.out.emit(conn, Reply(request.request_id, value, index=applied))  # type: ignore[arg-type]
        if self.observer is not None:  # (a request as any: tenure_requests_total)
            self.observer.request(request.command, None)

    def _read(self, conn: Conn, request: Request, staleness: float) -> object:
        """The read's answer from the state as it is now, or the watch armed with
        ``staleness`` (None: already answered); not a token's node listing
        (:meth:`_visible_nodes`, over several turns)."""
        command, token = request.command, conn.token
        session_id = getattr(command, "session_id", None)
        if session_id is not None and token is not None:
            session = self.host.engine.sessions.get(session_id)
            usage = session.usage if session is not None else None
            if session is not None and (usage is None or usage.owner != token.name):
                why = f"session {session_id} is not one of token {token.name!r}'s"
                self.fail(conn, request, ErrorCode.PERMISSION_DENIED, why)
                return None
        if is_standby_watch(command):
            value = self.watches.arm(conn, command, staleness)
        else:
            value = answer_read(self.host.engine, command)
        if type(value) in (DescribeResult, SessionPage, NodeDescription):
            value = stamp_reply(value, self.host.wall_shift())
        elif type(command) is WhyName:  # (the nodes the token may not read: hidden)
            value = with_addresses(value, self.owner, token)  # type: ignore[arg-type]
        return value

    async def _visible_nodes(
        self, command: ListNodes, prefixes: tuple[str, ...], may_touch: Callable[[str], bool]
    ) -> NodePage:
        """A page of the nodes a token may touch, ``--step-budget`` names looked at a
        turn of the loop (as the leader reads it: tenure.server._net.native)."""
        found: list[str] = []
        after = command.after
        budget = self.host.step_budget or DEFAULT_STEP_BUDGET
        while True:
            limit = command.limit - len(found) if found else command.limit
            names, resume = visible_node_slice(
                self.host.engine, after, limit, prefixes, may_touch, budget
            )
            found += names
            if resume is None:
                return NodePage(tuple(found))
            after = resume
            await asyncio.sleep(0)  # (everyone else is served between two slices)


def _token_listing(
    conn: Conn, request: Request
) -> tuple[ListNodes, tuple[str, ...], Callable[[str], bool]] | None:
    """The listing, and its token's prefixes and test, when ``request`` lists the nodes
    of a token limited to some (read in slices, over several turns of the loop:
    :meth:`StaleReads._visible_nodes`); else None."""
    command, token = request.command, conn.token
    if type(command) is ListNodes and token is not None and token.nodes is not None:
        return command, token.prefixes, token.may_touch
    return None


def _gone(conn: Conn) -> bool:
    """Whether ``conn`` can no longer be answered (closing, or its stream closed)."""
    return conn.closing or conn.codec.state is State.CLOSED or conn.transport.is_closing()
