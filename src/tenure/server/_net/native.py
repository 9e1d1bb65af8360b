"""The native face: the native protocol's messages, handled in order, per connection. [compiled]

:class:`NativeFace` is what :class:`~tenure.server._serve.Server` does with the
frames of a native connection (docs/protocol.md): the handshake and Pings go to the
:class:`~tenure.server._net.gate.Gate`, Requests are checked (authorization, session
ownership) and applied through the server's host, and every answer is queued in the
connection's outbox. :class:`~tenure.server._net.accept.AcceptedProtocol` calls
:meth:`NativeFace.serve_one` once per message, in fair turns. (The native face is
the server's own: it is no :class:`tenure.server.plug.Face`, and its connections are
routed their effects directly, on the hot path.)

Layer (CONTRIBUTING.md): this module may also import tenure._runtime,
tenure.server._session_table, tenure.server._observe and tenure.server.plug.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

from tenure._core import (
    AttachSession,
    CloseSession,
    Command,
    CreateNode,
    CreateSession,
    DetachSession,
    DropNode,
    KillSession,
    ListNodes,
    NodePage,
    ResumeSession,
    SessionInfo,
    WhyName,
)
from tenure._core.engine import DEFAULT_STEP_BUDGET
from tenure._core.handlers.listing import visible_node_slice
from tenure._core.stale_reads import is_stale_read, is_standby_watch
from tenure._protocol import (
    NEED_DATA,
    ConnectionClosed,
    Failure,
    GoingAway,
    Hello,
    LocalProtocolError,
    Ping,
    Pong,
    Refused,
    Reply,
    Request,
    State,
)
from tenure._protocol.admin import ReadBackup, ReloadFiles
from tenure._protocol.cluster import ClusterStatus
from tenure._protocol.frames import HEADER_SIZE
from tenure._runtime.host import Host
from tenure.errors import (
    ErrorCode,
    LimitExceededError,
    NotLeaderError,
    ProtocolError,
    TenureError,
    code_of,
)
from tenure.server._net.accept import AcceptedProtocol
from tenure.server._net.acts import ServerActs
from tenure.server._net.audit_acts import ADMIN_ACTS, act_of, what_of
from tenure.server._net.auth import Token
from tenure.server._net.cells import CellRequests, wrong_cell
from tenure.server._net.gate import Conn, Gate
from tenure.server._net.outbox import Outboxes
from tenure.server._net.stale_reads import StaleReads
from tenure.server._net.why_addresses import with_addresses
from tenure.server._observe import Auditor, ServerObserver
from tenure.server._session_table import SessionTable
from tenure.server.plug import Face

log = logging.getLogger("tenure.server")

# Looked up by exact type on every request (commands are never subclassed): a set
# lookup, not an isinstance of a union built anew each time.
#: Commands whose session_id may be one this connection does not own.
_NAMES_ANOTHER_SESSION: Final = frozenset({AttachSession, ResumeSession, KillSession})
#: Commands whose success attaches their session to the connection.
_ATTACHES: Final = frozenset({AttachSession, CreateSession, ResumeSession})


class NativeFace:
    """Handles native messages (module docstring); ``stopping()`` says if the server is."""

    def __init__(
        self,
        host: Host,
        gate: Gate,
        out: Outboxes,
        table: SessionTable[Conn | Face],
        stopping: Callable[[], bool],
        observer: ServerObserver | None = None,
        audit: Auditor | None = None,
    ) -> None:
        self.host = host
        self.observer = observer  # told of each request's outcome (None: not measured)
        #: Told of administrative acts and refusals (None: no ``--audit-log``).
        self.audit = audit
        self.gate = gate
        self.out = out
        self.table = table
        self._stopping = stopping
        #: The server's own acts (ReadBackup, ReloadFiles: set by who starts the
        #: server, :meth:`tenure.server._serve.Server.act_with`); None: refused.
        self.acts: ServerActs | None = None
        #: A standby's answers to reads that allow some staleness.
        self.stale = StaleReads(
            host, gate, out, table.owner, self._fail, gate.config.stale_read_wait, observer
        )
        #: A cell's creations of nodes (their places claimed first) and drops.
        self.cells = CellRequests(host, self._claimed, self._fail)

    def on_data(self, conn: Conn, data: bytes) -> None:
        """Bytes of a native connection (``b""``: its end), straight from the loop.

        The first frame, the Hello, may be at most ``--max-hello-size`` bytes (its
        length prefix included): one announced larger is refused before a byte of
        its body reaches the codec, so that an unauthenticated peer cannot make the
        server buffer a whole frame of ``--max-frame-size`` (issue 28). (What follows
        a complete Hello is read once the Hello is answered, as ever: a client may
        pipeline its first requests.)
        """
        if conn.closing:
            return
        head = conn.hello_head
        if len(head) < HEADER_SIZE and conn.codec.state is State.HANDSHAKE:
            head = conn.hello_head = head + data[: HEADER_SIZE - len(head)]
            if len(head) == HEADER_SIZE:
                limit = self.gate.config.max_hello_size
                if int.from_bytes(head, "big") + HEADER_SIZE > limit:
                    self._hello_too_large(conn, limit)
                    return
        conn.codec.receive_data(data)

    def _hello_too_large(self, conn: Conn, limit: int) -> None:
        fields = {"peer": conn.peer, "max_hello_size": limit}
        log.info("Hello too large; closing", extra={"fields": fields})
        why = f"a Hello larger than max_hello_size ({limit} bytes)"
        with contextlib.suppress(LocalProtocolError):
            self.out.emit(conn, Refused(ErrorCode.PROTOCOL, why))
        conn.closing = True

    def serve_one(self, conn: Conn, accepted: AcceptedProtocol) -> bool:
        """Handle the next message of a native connection; whether another may follow.

        A request read while the host is behind with due deadlines (a mass expiry
        being done in slices, a slice per turn of the loop) is held back until it has
        caught up, and the connection with it: the engine would otherwise do all the
        rest in this request's step (a command never sees what its time has ended).
        Pings of other connections, and their requests read earlier, are served
        meanwhile. A request answered in a task (``Conn.answering``: a reload, a stale
        read) holds back what the connection sends next until then, but for its Pings,
        answered meanwhile (:meth:`_ping_meanwhile`).
        """
        ended = self.host.dead or conn.closing
        try:
            event: Hello | Request | Ping | ConnectionClosed | None = None
            if ended:
                pass
            elif conn.answering is not None:
                event = self._ping_meanwhile(conn)
                if event is None:
                    self._wait_for_answer(conn, conn.answering, accepted)
                    return False
            elif conn.held_back is not None:
                if self.host.behind():
                    self._wait_for_host(conn, accepted)
                    return False
                event, conn.held_back = conn.held_back, None
            else:
                read = conn.codec.next_event()
                if read is NEED_DATA:
                    return False
                if type(read) is Request and self.host.behind():
                    self.gate.frame(conn)  # heard now, served later
                    conn.held_back = read
                    self._wait_for_host(conn, accepted)
                    return False
                event = read
            if isinstance(event, ConnectionClosed):
                ended = True
            elif event is not None:
                self._on_message(conn, event)
                if conn.held_back is not None:  # a listing goes on at the next turn
                    accepted.serve_later()
                    return False
        except ProtocolError as error:
            self._last_word(conn, error)
        if ended or conn.closing or conn.codec.their_error is not None:
            accepted.finish()
            return False
        return True

    def _ping_meanwhile(self, conn: Conn) -> Ping | None:
        """The next frame of ``conn`` if it is a Ping, answered while a request of the
        connection is owed its answer (``Conn.answering``); anything else is read once
        it is answered (None), and the frames after it with it."""
        read = conn.codec.next_ping()
        return None if read is NEED_DATA else read

    def _wait_for_host(self, conn: Conn, accepted: AcceptedProtocol) -> None:
        """Serve ``conn`` again once the host has caught up (asked once at a time)."""
        if conn.awaits_host:
            return
        conn.awaits_host = True

        def wake() -> None:
            conn.awaits_host = False
            accepted.serve_later()

        self.host.when_caught_up(wake)

    def _wait_for_answer(
        self, conn: Conn, answering: asyncio.Task[None], accepted: AcceptedProtocol
    ) -> None:
        """Serve ``conn`` again once ``answering`` is done (asked once at a time)."""
        if conn.awaits_answer:
            return
        conn.awaits_answer = True

        def wake(_: asyncio.Task[None]) -> None:
            conn.awaits_answer = False
            accepted.serve_later()

        answering.add_done_callback(wake)

    def _on_message(self, conn: Conn, message: Hello | Request | Ping) -> None:
        self.gate.frame(conn)
        if isinstance(message, Request):
            self._on_request(conn, message)
        elif isinstance(message, Ping):
            # (A keepalive, not a request: no token's rate counts it, as refusing it
            # would end an honest session: tenure.server._net.token_rates.)
            self.out.emit(conn, Pong(message.nonce))
        else:
            self.gate.hello(conn, message, stopping=self._stopping())

    def _last_word(self, conn: Conn, error: ProtocolError) -> None:
        log.info(
            "protocol error; closing", extra={"fields": {"peer": conn.peer, "error": str(error)}}
        )
        before_welcome = conn.codec.state in (State.HANDSHAKE, State.GREETING)
        word = Refused if before_welcome else GoingAway
        with contextlib.suppress(LocalProtocolError):
            self.out.emit(conn, word(ErrorCode.PROTOCOL, str(error)))
        conn.closing = True

    def _claimed(self, conn: Conn, request: Request) -> None:
        """Serve ``request`` (a CreateNode), its node's place in the directory claimed."""
        self._on_request(conn, request, claimed=True)

    def _on_request(self, conn: Conn, request: Request, claimed: bool = False) -> None:
        command, rid = request.command, request.request_id
        if self._stopping() or conn.closing:
            why = "the server is shutting down" if self._stopping() else "the connection is closing"
            self._fail(conn, request, ErrorCode.UNAVAILABLE, why)
            return
        denied = self.gate.denial(conn, command, self.host.engine.sessions)
        if denied is not None:
            self._fail(conn, request, ErrorCode.PERMISSION_DENIED, denied)
            return
        role = self.gate.role
        kind = type(command)
        if kind is ClusterStatus:  # the server's to answer, never the engine's
            self._cluster_status(conn, request)
            return
        if kind is ReloadFiles:  # every member's, of its own files
            self._act(conn, request)
            return
        if not role.leading:
            if request.max_staleness is not None and (
                is_stale_read(command) or is_standby_watch(command)
            ):
                self.stale.answer(conn, request)  # (from this standby's state: stale_reads)
                return
            standby = NotLeaderError.pointing_to(role.leader(), "this server is a standby")
            self._fail(conn, request, ErrorCode.NOT_LEADER, str(standby))
            return
        if kind is ReadBackup:  # the leader's: the cluster's state
            self._act(conn, request)
            return
        places = role.places
        if (
            kind is CreateNode
            and places is not None
            and not claimed
            and self.cells.create(conn, request, places, command.name)  # type: ignore[attr-defined]
        ):
            return  # (placed first: served once the directory answered)
        session_id = getattr(command, "session_id", None)
        if (
            session_id is not None
            # (KillSession names another session: an operator's, by its node.)
            and type(command) not in _NAMES_ANOTHER_SESSION
            and self.table.owner(session_id) is not conn
        ):
            why = f"session {session_id} is not attached to this connection"
            self._fail(conn, request, ErrorCode.PERMISSION_DENIED, why)
            return
        value: object
        try:
            token = conn.token
            # (The command's bytes as decoded from its frame: the journal logs them as
            # they are, encoding nothing again: tenure._durability.records.)
            if token is None:
                value = self.host.execute(command, "", conn.codec.command_bytes(request))
            elif isinstance(command, ListNodes):
                page = self._visible_nodes(conn, request, token, command)
                if page is None:
                    conn.held_back = request  # more to read: at the connection's next turn
                    return
                value = page
            else:  # (what it makes is the token's: the host tells the engine)
                self.host.admit_request(token.name)  # (its rate: one per request)
                value = self.host.execute(command, token.name, conn.codec.command_bytes(request))
        except Exception as error:
            if not isinstance(error, TenureError | TimeoutError):
                log.exception("command %s failed unexpectedly", type(command).__name__)
            quota = error.quota if isinstance(error, LimitExceededError) else None
            error = wrong_cell(places, self.host, command, error)  # (another cell's node?)
            self._fail(conn, request, code_of(error), str(error), quota)
            return
        if type(command) in _ATTACHES:
            # (A resume's SessionEnded, routed to the previous owner as the command
            # was applied, dropped what was queued for it: the new owner reads the
            # session's holds afresh.)
            assert isinstance(value, SessionInfo)
            for effect in self.table.attach(value.session_id, conn):
                self.out.push(conn, effect)
            self.gate.attached(conn, value.timeout)
        elif isinstance(command, DetachSession):
            self.table.detach(command.session_id)
        elif isinstance(command, CloseSession):
            self.table.forget(command.session_id)
        elif kind is DropNode and places is not None:  # (its place in the directory, back)
            self.cells.dropped(places, command.name)  # type: ignore[attr-defined]
        elif kind is WhyName:  # (who connects each session: this face's table alone knows)
            value = with_addresses(value, self.table.owner, conn.token)  # type: ignore[arg-type]
        self.out.emit(conn, Reply(rid, value))  # type: ignore[arg-type]
        if self.observer is not None:
            self.observer.request(command, None)
        if self.audit is not None and type(command) in ADMIN_ACTS:
            self._audit(conn, command, None, "", None)

    def _act(self, conn: Conn, request: Request) -> None:
        """Hand an act of the server on itself to its acts (:mod:`tenure.server._net.acts`)."""
        acts = self.acts
        if acts is None:
            why = f"this server does not take {type(request.command).__name__} requests"
            self._fail(conn, request, ErrorCode.UNSUPPORTED, why)
            return
        try:
            acts.answer(conn, request)
        except Exception:  # (a bug there must not end the connection's turn)
            log.exception("%s failed unexpectedly", type(request.command).__name__)
            self._fail(conn, request, ErrorCode.INTERNAL, "the server failed to answer")

    def _cluster_status(self, conn: Conn, request: Request) -> None:
        """Answer ClusterStatus: the cluster as this server knows it (any role)."""
        if conn.token is not None:
            try:
                self.host.admit_request(conn.token.name)  # (a request like any other)
            except LimitExceededError as error:
                self._fail(conn, request, ErrorCode.LIMIT_EXCEEDED, str(error), error.quota)
                return
        view = self.gate.role.status()
        if view is None:
            why = "this server is not part of a cluster (tenure serve --cluster)"
            self._fail(conn, request, ErrorCode.UNSUPPORTED, why)
            return
        self.out.emit(conn, Reply(request.request_id, view))
        if self.observer is not None:
            self.observer.request(request.command, None)

    def _visible_nodes(
        self, conn: Conn, request: Request, token: Token, command: ListNodes
    ) -> NodePage | None:
        """A page of the nodes ``token`` may touch (it does not learn the others' names),
        or None while it is being read: the rest at the connection's next turn.

        Read from the ranges of the engine's sorted node names that the token's
        patterns cover (:func:`~tenure._core.handlers.listing.visible_node_slice`): the
        nodes it may not see outside them cost nothing, and a page shorter than the
        limit is still the last one. A range may be all the nodes (a pattern that
        starts with a wildcard, ``*-jobs``): a turn looks at ``--step-budget`` names at
        most, and the page goes on from there at the next turn (every other
        connection is served between), so no page holds the loop for long.
        """
        found: list[str] = []
        after = command.after
        listing = conn.listing
        conn.listing = None
        if listing is not None and listing[0] is request:
            _, found, after = listing  # going on with this request's page (counted once)
        else:
            self.host.admit_request(token.name)  # (its rate: one per request)
            if token.nodes is None:
                return self.host.execute(command, token.name)
            # (The host's say first: a standby refuses; a page of one, not read.)
            self.host.execute(ListNodes(command.after, 1), token.name)
        budget = self.host.step_budget or DEFAULT_STEP_BUDGET
        names, resume = visible_node_slice(
            self.host.engine,
            after,
            command.limit - len(found) if found else command.limit,  # (checked there)
            token.prefixes,
            token.may_touch,
            budget,
        )
        found += names
        if resume is None:
            return NodePage(tuple(found))
        conn.listing = (request, found, resume)
        return None

    def _fail(
        self, conn: Conn, request: Request, code: ErrorCode, why: str, quota: str | None = None
    ) -> None:
        """Answer ``request`` with a Failure (and count it; ``quota``: the quota of a
        token, or the memory budget, that refused it)."""
        self.out.emit(conn, Failure(request.request_id, code, why))
        if self.observer is not None:
            self.observer.request(request.command, code)
        if self.audit is not None:
            self._audit(conn, request.command, code, why, quota)

    def _audit(
        self,
        conn: Conn,
        command: Command[object],
        code: ErrorCode | None,
        why: str,
        quota: str | None,
    ) -> None:
        """Record an answer in the audit log if it is an act or a refusal it records
        (:mod:`tenure.server._net.audit_acts`): the token's name, never its secret."""
        audit = self.audit
        act = act_of(command, code, quota)
        if audit is None or act is None:
            return
        what = what_of(command, self.host.engine.sessions, quota)
        if code is not None:
            what["why"] = why
        audit.record(
            act,
            token=conn.token.name if conn.token is not None else None,
            address=conn.host,
            outcome="ok" if code is None else code.name.lower(),
            **what,
        )
