"""The network server: a built host served to many connections, from start to stop.

Everything runs on one event loop, so the engine sees one command at a time. Each
step (a client's command, a DetachSession for a lost connection, a timer tick) is
applied, logged, and its answers and pushes are put in their connection's outbox.
The outboxes (:mod:`tenure.server._net.outbox`) leave only after the commit that
follows (group commit, see :mod:`tenure.server._group_commit`), so no reply or push
ever tells a client about a change the disk does not have. A failed commit is fatal:
the journal is aborted, every connection dropped, and the server exits non-zero (a
server of a cluster steps down instead).

A :class:`Server` is given its host built already (:mod:`tenure.server._server_host`:
a single server's over its data directory, or a cluster member's, leader or
standby), and attaches what only it owns: the routing of effects
(:mod:`tenure.server._routing`), its outboxes and what to do once the journal fails.
It is given its listening sockets too, bound already
(:func:`~tenure.server._reception.listening_sockets`, by ``tenure serve`` or a cluster
member, which binds them once for all its terms), and listens on them through its
:class:`~tenure.server._reception.Reception` (sockets admitted, connections made and
handed to their face); a listening face binds its own port when the server starts.

The server speaks several protocols, its faces (:mod:`tenure.server.plug`). Native
messages are handled by :class:`~tenure.server._net.native.NativeFace` (in fair
turns, :mod:`tenure.server._net.accept`); the faces of other lock services are made
from what the settings turn on (:mod:`tenure.server._faces`): an accepted face is
handed the connections whose first byte is not a native frame's, and those of its own
port; a listening face runs a listener of its own, whose streams the outboxes write
like connections. Session ownership and the queues of detached
sessions are in :class:`~tenure.server._session_table.SessionTable` (docs/protocol.md
section 11); the handshake, tokens, authorization and the handshake, idle and
silence timeouts in :class:`~tenure.server._net.gate.Gate`; TLS in
:mod:`tenure.server._net.tls`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Mapping
from functools import partial

from tenure._core import DetachSession
from tenure._protocol import GoingAway, Refused, State
from tenure.errors import ErrorCode, NotLeaderError, TenureError
from tenure.server import _faces
from tenure.server._audit import AuditLog
from tenure.server._backups import BackupSlots
from tenure.server._config.quota_settings import default_quota
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.identity import server_secret
from tenure.server._face_set import FaceSet
from tenure.server._long_holds import LongHolds
from tenure.server._net.acts import ServerActs
from tenure.server._net.auth import Tokens
from tenure.server._net.gate import Conn, Gate
from tenure.server._net.native import NativeFace
from tenure.server._net.outbox import Outboxes
from tenure.server._net.token_rates import TokenRates
from tenure.server._observe import ServerObserver
from tenure.server._reception import Reception, Sockets
from tenure.server._role import STANDALONE_ROLE, Role
from tenure.server._routing import Routing
from tenure.server._server_host import ServerHost
from tenure.server._session_table import SessionTable
from tenure.server.plug import Face, FaceFactory, Plug

log = logging.getLogger("tenure.server")

__all__ = ["Server", "Sockets"]


class Server:
    """Serves one engine, through the host it is given, to many connections (module
    docstring).

    ``faces`` makes the faces of other lock services by name (None: those ``config``
    turns on, :func:`tenure.server._faces.factories`); at most one of them may be an
    accepted face, as the main port tells only native clients from one other protocol.

    Raises (at construction):
        ConfigError: the TLS or auth files named in ``config`` cannot be loaded.
        ValueError: ``faces`` makes two accepted faces.
    """

    def __init__(
        self,
        config: ServeConfig,
        served: ServerHost,
        sockets: Sockets,
        instance_id: bytes,
        faces: Mapping[str, FaceFactory] | None = None,
        observer: ServerObserver | None = None,
        *,
        role: Role = STANDALONE_ROLE,
        secret: bytes | None = None,
        relay_secret: bytes | None = None,
        audit: AuditLog | None = None,
        loaded: tuple[ssl.SSLContext | None, Tokens | None] | None = None,
    ) -> None:
        """``served``: the host, built for this server (:mod:`tenure.server._server_host`);
        ``sockets``: the main port's and the accepted face's, bound already (the caller
        closes them once the server is done);
        ``observer``: told of requests, commands, effects and commits (the metrics of
        ``--http-port``; None: nobody measures); ``role``: whether it leads a cluster (a
        server of a cluster steps down instead of exiting when its journal fails, see
        :meth:`step_down`); ``secret``: what the faces sign with (None: the data
        directory's, made on first use); ``relay_secret``: what the face connections
        relayed between members are signed with (a service's, every cell's; None:
        ``secret``); ``audit``: the audit log (``--audit-log``; the
        caller opens and closes it, once for all of a cluster member's terms; None: off);
        ``loaded``: the TLS context and tokens to serve with instead of loading
        ``config``'s files (a cluster member's next term keeps its previous term's,
        reloaded or not: :mod:`tenure.server._reload`)."""
        self.config = config
        #: Where administrative acts and refusals are recorded: the reload and backup
        #: commands record theirs here too (``server.audit.record("reload", ...)``).
        self.audit = AuditLog() if audit is None else audit
        self.served = served
        self.sockets = sockets
        self.host = served.host
        self.instance_id = instance_id
        self.exit_code = 0
        self.role = role
        self.out = Outboxes(config, served.commit.request_flush)
        self._table: SessionTable[Conn | Face] = SessionTable(max_queued=config.max_queued_pushes)
        self.gate = Gate(
            config,
            instance_id,
            self.out.emit,
            window_of=self._window_of,
            detach=self._detach_all,
            role=role,
            pauses=served.pauses,
            loaded=loaded,
        )
        self.routing = Routing(self.host, self._table, self.out)
        served.attach(self.routing.route, self.out, self._on_fatal)
        # (The quotas and the request rates are the server's: its auth file's tokens'.
        # The rates are checked before the engine sees a token's command.)
        if self.gate.tokens is not None:
            ledger = self.host.engine.ledger
            ledger.quotas = self.gate.tokens.quotas(default_quota(config))
            served.commit.rates = TokenRates(ledger.quotas, ledger.refused)
            if self.audit.on:  # every listener's failed logins (they share the throttle)
                self.gate.tokens.throttle.audit = self._auth_failed
        # Neither a quota nor the memory budget: no bookkeeping per change (the
        # metrics' estimate is then counted from the state when asked).
        self.host.engine.ledger.pause_counting()
        self._stopping = False
        self.native = NativeFace(
            self.host,
            self.gate,
            self.out,
            self._table,
            stopping=lambda: self._stopping,
            observer=observer,
            audit=self.audit if self.audit.on else None,
        )
        #: What the faces, the dashboard's login tickets and the relays of a face's
        #: connections sign with: the data directory's secret, or a cluster's shared one.
        self.secret = server_secret(config.data_dir) if secret is None else secret
        self.reception = Reception(
            config,
            self.host,
            self.gate,
            self.out,
            self.native,
            role,
            stopping=lambda: self._stopping,
            detach=self._detach_all,
            secret=self.secret if relay_secret is None else relay_secret,
        )
        # What the server lends each face; its own ``attach`` is the one argument left.
        lend = partial(
            Plug,
            config,
            self.host,
            self.gate.tokens,
            self.out.send,
            self.out.finish,
            forget=self._table.forget,
            connections=self.reception.served,
            secret=self.secret,
            role=role,
            front=self.reception.front if config.max_connections_per_address else None,
            audit=self.audit if self.audit.on else None,
        )
        makers = _faces.factories(config) if faces is None else faces
        #: The faces of other lock services this server speaks.
        self.faces = FaceSet(makers, lend, route=self._table.attach, observer=observer)
        #: The listening face :meth:`start` was binding when it failed (its name);
        #: None: none failed.
        self.binding: str | None = None
        self._shutdown_task: asyncio.Task[None] | None = None
        #: Why the server stepped down (a cluster's: it no longer leads, or a standby's
        #: term ended); None: it did not.
        self.stepped_down: str | None = None
        self._done = asyncio.Event()
        #: The backups being taken now, over HTTP and the native protocol together
        #: (``--max-backups``).
        self.backup_slots = BackupSlots(config.max_backups)
        #: What tells of holds past their node's ``long_hold`` or ``--long-hold-seconds``
        #: (made whether the flag is set or not: a node may set its own threshold).
        self.long_holds = LongHolds(
            config.long_hold_seconds,
            lambda: self.host.engine,
            self.host.clock.now,
            self.audit if self.audit.on else None,
            config.step_budget,
        )

    def act_with(self, acts: ServerActs) -> None:
        """Answer the operator's acts on the server itself (ReadBackup, ReloadFiles:
        :mod:`tenure.server._server_acts`) with ``acts``; told of each connection lost."""
        self.native.acts = acts

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> tuple[str, int]:
        """Listen; returns the main port's address (``--port 0`` picks one).

        Raises:
            OSError: a listening face cannot bind its port (:attr:`binding` says which);
                then nothing listens, no face runs and the journal is closed.
        """
        try:
            # Our own accept loops (tenure.server._net.listen): they stop accepting
            # while --max-handshaking connections are in their handshake.
            address = self.reception.open(self.sockets, self.faces.accepted)
            self.served.start()
            self.faces.start()
            await self.faces.listen(partial(setattr, self, "binding"))
            if self.role.leading:
                self.long_holds.start()  # (a standby's holds are its leader's to tell)
        except OSError:
            self._stopping = True  # (nothing was served: stop() has nothing to say)
            self.reception.close()
            self.faces.stop()
            self.served.shutdown()
            raise
        self.binding = None
        return address

    @property
    def stopping(self) -> bool:
        """Whether the server is shutting down, or stopped by a failed journal."""
        return self._stopping or self.served.dead or self._done.is_set()

    def connections(self) -> dict[str, int]:
        """The client connections open now, by face (``native``, the accepted face's,
        and each listening face's streams)."""
        conns = self.reception.conns
        native = sum(1 for conn in conns if isinstance(conn, Conn))
        counts = {"native": native}
        if self.faces.accepted is not None:
            counts[self.faces.accepted.protocol] = len(conns) - native
        return counts | self.faces.connections()

    async def wait(self) -> int:
        """Until the server stopped (signal or fatal error); returns the exit code."""
        await self._done.wait()
        return self.exit_code

    def stop(self) -> None:
        """Graceful shutdown: stop accepting, GoingAway to everyone, close the journal."""
        if self._stopping or self.served.dead:
            return
        self._stopping = True
        self.long_holds.stop()
        self.native.stale.cancel()
        self.native.cells.cancel()
        conns = self.reception.conns
        log.info("shutting down", extra={"fields": {"connections": len(conns)}})
        self.reception.close()
        self.faces.stop()
        for conn in list(conns):
            if not isinstance(conn, Conn):
                continue  # an accepted face's: it answers that it drains, closed with the rest
            if conn.codec.state is State.OPEN:
                self.out.emit(conn, GoingAway(ErrorCode.UNAVAILABLE, "the server is shutting down"))
            elif conn.codec.state in (State.HANDSHAKE, State.GREETING):
                self.out.emit(conn, Refused(ErrorCode.UNAVAILABLE, "the server is shutting down"))
                conn.closing = True
        self._shutdown_task = asyncio.ensure_future(self._shutdown())

    async def _shutdown(self) -> None:
        served = self.served
        served.flush()
        served.stop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.config.shutdown_grace):
                await self.reception.idle.wait()
        await self.faces.close(self.config.shutdown_grace)
        await served.settled()  # every answer owed is durable and written before the close
        for conn in list(self.reception.conns):
            conn.writer.close()
        if not served.shutdown():
            self.exit_code = 1
        log.info("stopped", extra={"fields": {"exit_code": self.exit_code}})
        self._done.set()

    async def step_down(self, why: str) -> None:
        """Stop serving at once, for good: this server of a cluster no longer leads (or a
        standby's term ends). Idempotent.

        Nothing that is not durable leaves: the host acknowledges nothing more, and what
        was sealed to a batch not yet in the log is dropped. Native clients are told
        ``NOT_LEADER`` (GoingAway; Refused during the handshake), naming the leader if
        one is known; the other faces' connections and streams are dropped (their
        clients reconnect, and find the leader). The listeners close (a cluster keeps
        the sockets for its next server), then :meth:`wait` returns 0.
        """
        if self.stepped_down is not None or self._done.is_set():
            return
        self.stepped_down = why
        self._stopping = True
        self.long_holds.stop()
        self.native.stale.cancel()
        self.native.cells.cancel()
        self.reception.close()
        self.faces.stop()
        self.served.abandon()
        self.out.drop_sealed()
        word = str(NotLeaderError.pointing_to(self.role.leader(), why))
        conns = self.reception.conns
        for conn in list(conns):
            conn.outbox.clear()
            if isinstance(conn, Conn):
                _last_word(conn, word)
            else:
                conn.writer.transport.abort()
        self.faces.abort()
        await self.faces.close(0.0)
        for conn in list(conns):
            if isinstance(conn, Conn):
                conn.writer.close()
        self._done.set()

    def _on_fatal(self) -> None:
        """The journal failed (the host has stopped): drop every connection unanswered
        and exit non-zero (a server of a cluster steps down instead: :meth:`step_down`)."""
        if self.role.name:
            self._shutdown_task = asyncio.ensure_future(
                self.step_down("this server's journal in etcd failed")
            )
            return
        self.exit_code = 1
        self.reception.close_main()
        for conn in list(self.reception.conns):
            conn.outbox.clear()
            conn.writer.transport.abort()
        self.faces.abort()
        self._done.set()

    def _auth_failed(self, address: str, token: str | None, outcome: str, attempts: int) -> None:
        """A failed login, or ``attempts`` refused while blocked, on any listener."""
        self.audit.record(
            "auth_failed", token=token, address=address, outcome=outcome, attempts=attempts
        )

    # -- the sessions of a connection ---------------------------------------------------

    def _detach_all(self, conn: Conn) -> None:
        """Detach the sessions ``conn`` owns, their windows counted from its last frame
        (and give up what the server's acts keep for it, a backup being read, and the
        watches it armed on a standby)."""
        acts = self.native.acts
        if acts is not None:
            acts.forget(conn)
        self.native.stale.watches.closed(conn)  # (a standby's: tenure.server._net.standby_watches)
        sessions = self._table.drop_connection(conn)
        if sessions and not (self._stopping or self.served.dead):
            silent_for = self.gate.silent_for(conn)
            for session_id in sessions:
                with contextlib.suppress(TenureError):
                    self.host.execute(DetachSession(session_id, silent_for))
            fields = {"peer": conn.peer, "sessions": sessions, "silent_for": round(silent_for, 3)}
            log.info("connection lost; sessions detached", extra={"fields": fields})

    def _window_of(self, conn: Conn) -> float | None:
        """The shortest recovery window of the sessions attached to ``conn`` (None: none)."""
        sessions = self.host.engine.sessions
        windows = [sessions[sid].timeout for sid in self._table.owned_by(conn) if sid in sessions]
        return min(windows, default=None)


def _last_word(conn: Conn, why: str) -> None:
    """Tell a native connection NOT_LEADER, now (nothing queued before it leaves)."""
    state = conn.codec.state
    message = (
        GoingAway(ErrorCode.NOT_LEADER, why)
        if state is State.OPEN
        else Refused(ErrorCode.NOT_LEADER, why)
    )
    conn.closing = True
    if state in (State.HANDSHAKE, State.GREETING, State.OPEN):
        with contextlib.suppress(Exception):  # (a broken transport: nothing to tell)
            conn.writer.write(conn.codec.send(message))
