"""The dflockd face: the dflockd line protocol, served from the same engine.

The user's page is docs/dflockd.md. It is an accepted face
(:class:`tenure.server.plug.AcceptedFace`), made by :meth:`DflockdFace.plugged` from
the plug the server lends it.

A connection whose first byte is not a native frame's (the length prefix of a
Hello starts with a zero byte) speaks dflockd: three-line requests, one-line
answers, strictly one at a time (:mod:`tenure.compat.dflockd.codec`). Each request
becomes engine commands, journaled and group-committed like native ones, so the
answer leaves only once the change is on disk.

Semantics follow the newest dflockd server (the reference spec is
shared/reference/dflockd-protocol.md): per-key FIFO, leases with a server default,
renew, two-phase enqueue/wait bound to the connection, release on disconnect
(``--dflockd-auto-release``), semaphores whose first caller fixes the limit,
fencing tokens, an idle-key collector and ``--dflockd-max-locks``. There is no
idle timeout between requests: a client that holds a lease or waits is never
dropped for being quiet (the spec's §9.6 trap); a request that stalls halfway is
(``--idle-timeout``). Every request after ``auth`` (a renew and a ping as much as an
acquire) counts against its token's ``requests_per_second`` before any of its work,
once however many commands it makes; past it the answer is ``error``, as for the
token's other quotas. Reading, the ``auth`` handshake and each connection's fair
share are :mod:`tenure.compat.dflockd.loop`'s; the nodes, key limits, idle-key
collector and the sessions an earlier run left, :mod:`tenure.compat.dflockd.keeper`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AcquireStatus,
    CloseSession,
    CreateSemaphore,
    CreateSession,
    Effect,
    Granted,
    LeaseLost,
    Renew,
    SessionEnded,
)
from tenure.compat.dflockd import codec as wire
from tenure.compat.dflockd.holds import (
    SESSION_DESCRIPTION,
    DflockdConn,
    Hold,
    Registry,
    TokenMint,
    node_of,
)
from tenure.compat.dflockd.keeper import Keeper, session_key
from tenure.compat.dflockd.loop import READ_SIZE, LineLoop, Pace
from tenure.compat.dflockd.metrics import DflockdCounts
from tenure.compat.dflockd.settings import SETTINGS, DflockdSettings
from tenure.errors import AlreadyExistsError, ErrorCode, LimitExceededError, TenureError
from tenure.server.plug import (
    Auditor,
    HostCalls,
    Plug,
    Role,
    Tokens,
    peer_host,
    record_quota_refusal,
)

log = logging.getLogger("tenure.server")


class DflockdFace:
    """Serves dflockd connections from the server's host (see the module docstring).

    As the server sees it (:class:`~tenure.server.plug.AcceptedFace`): ``port`` is
    ``--dflockd-port``, ``start``/``stop`` run the keeper, ``stop`` also makes every
    request answer ``error_draining``.
    """

    def __init__(
        self,
        host: HostCalls,
        settings: DflockdSettings,
        pace: Pace,
        secret: bytes,
        tokens: Tokens | None,
        send: Callable[[DflockdConn, bytes], None],
        attach: Callable[[int], None],
        forget: Callable[[int], None],
        connections: Callable[[], int],
        observer: DflockdCounts | None = None,
        audit: Auditor | None = None,
        role: Role | None = None,
    ) -> None:
        """``audit``: where a refusal by a quota of a connection's token, or by the
        memory budget, is recorded (``--audit-log``; None: off); ``role``: whether the
        server leads (a cluster's standby keeps no nodes of its own; None: a lone
        server's, which does)."""
        self.host = host
        self.audit = audit
        self.role = role
        self.settings = settings
        self.tokens = tokens
        self.holds = Registry()
        self.mint = TokenMint(secret)
        self.keeper = Keeper(
            host, settings, self.holds, key=session_key(secret), attach=attach, forget=forget
        )
        self.draining = False
        #: How many client connections the server has open (``stats`` reports it).
        self.connections = connections
        self.lines = LineLoop(
            pace,
            tokens,
            answer=self._answer_request,
            send=send,
            disconnected=self.disconnected,
            observer=observer,
        )
        self._loop = asyncio.get_running_loop()
        self._last_conn_id = 0
        #: The connections open now, by id (a reload closes a removed token's).
        self._open: dict[int, DflockdConn] = {}

    @classmethod
    def plugged(cls, plug: Plug) -> DflockdFace:
        """The dflockd face of the server that lends ``plug`` (its tokens signed with the
        server's secret: they stay valid across restarts, and across a cluster's
        failovers)."""
        return cls(
            plug.host,
            plug.config.face(SETTINGS),
            Pace.from_config(plug.config),
            plug.secret,
            plug.tokens,
            plug.send,
            attach=plug.attach,
            forget=plug.forget,
            connections=plug.connections,
            observer=plug.observer_as(DflockdCounts),
            audit=plug.audit,
            role=plug.role,
        )

    # -- the face, as the server sees it ------------------------------------------------

    #: The protocol's name in the server's logs and metrics.
    protocol: Final = "dflockd"

    @property
    def port(self) -> int:
        """``--dflockd-port``: a port for dflockd clients only (0: the main port only)."""
        return self.settings.port

    def start(self) -> None:
        """The server listens: the keeper starts (nodes, an earlier run's sessions, gc),
        if the server leads: a standby's engine is its leader's, changed by the log only
        (its connections are relayed to the leader: tenure.server._net.relay)."""
        if self.role is None or self.role.leading:
            self.keeper.start()

    def stop(self) -> None:
        """The server is stopping: every request is answered ``error_draining`` from now."""
        self.draining = True
        self.keeper.stop()

    def connect(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> DflockdConn:
        """A connection that was found to speak dflockd."""
        self.keeper.ready()
        self._last_conn_id += 1
        conn = DflockdConn(reader, writer, peer, self._last_conn_id)
        conn.authenticated = self.tokens is None
        self._open[conn.conn_id] = conn
        return conn

    def prepare_reload(self) -> None:
        """A reload's step (:class:`tenure.server.plug.Reloading`): no files of its own."""
        return

    def tokens_gone(self, names: frozenset[str]) -> int:
        """Close the connections that ``auth``-ed with a token removed or rotated by a
        reload (their holds then go as on any lost connection: waiters at once, grants
        with ``--dflockd-auto-release``, or at their lease's end); how many."""
        gone = [conn for conn in self._open.values() if conn.token in names and conn.token]
        for conn in gone:
            log.info(
                "dflockd: closing a connection of a removed or rotated token",
                extra={"fields": {"peer": conn.peer, "token": conn.token}},
            )
            conn.closing = True
            conn.writer.close()  # (its read loop sees the end, and it is disconnected)
        return len(gone)

    # -- one connection -----------------------------------------------------------------

    async def serve(self, conn: DflockdConn, first: bytes = b"") -> None:
        """Answer requests until the peer leaves or the stream cannot be trusted
        (:class:`~tenure.compat.dflockd.loop.LineLoop`)."""
        await self.lines.serve(conn, first)

    async def _answer_request(self, conn: DflockdConn, request: wire.Request) -> bytes:
        """The answer to an authenticated request."""
        if self.draining or self.host.dead:
            return wire.ERROR_DRAINING
        try:  # every request, whatever it is, counts against its token's rate first
            self.host.admit_request(conn.token)
        except LimitExceededError as error:
            # (Counted in /metrics, tenure_quota_refusals_total: a line per refusal
            # would let a token write the server's log at the rate it is refused.)
            log.debug("dflockd: %s", error)
            self._refused(conn, error, type(request).__name__)
            return wire.ERROR
        await self.host.caught_up()  # (a mass expiry's slices first: --step-budget)
        try:
            return await self._handle(conn, request)
        except Exception:  # a bug must cost this request, never the server
            log.exception("dflockd: %s failed unexpectedly", type(request).__name__)
            return wire.ERROR

    async def _handle(self, conn: DflockdConn, request: wire.Request) -> bytes:
        match request:
            case wire.Acquire():
                return await self._acquire(conn, request)
            case wire.Enqueue():
                return self._enqueue(conn, request)
            case wire.Wait():
                return await self._wait(conn, request)
            case wire.Release():
                return self._release(request.key, request.token, request.semaphore)
            case wire.Renew():
                return self._renew(request.key, request.token, request.semaphore, request.lease)
            case wire.Stats():
                return wire.stats(self.keeper.stats(self.connections()))
            case wire.Ping() | wire.ReplicationBarrier():
                return wire.OK
            case wire.StableRef():
                if conn.stable_ref:
                    return wire.ERROR
                conn.stable_ref = True
                return wire.OK
            case wire.Auth():  # after the handshake, or without one: not a command
                return wire.ERROR
        return wire.ERROR  # pragma: no cover - the match is exhaustive

    def _refused(
        self, conn: DflockdConn, error: LimitExceededError, request: str, key: str = ""
    ) -> None:
        """Record a refusal by a quota or the memory budget in the audit log (as the
        native face does: the token's name, the client's address, never a secret)."""
        what: dict[str, object] = {"via": "dflockd", "request": request}
        if key:
            what["key"] = key
        address = peer_host(conn.peer)
        record_quota_refusal(self.audit, error, token=conn.token or None, address=address, **what)

    # -- acquiring ----------------------------------------------------------------------

    def _start(
        self,
        conn: DflockdConn,
        key: str,
        semaphore: bool,
        limit: int,
        lease: int | None,
        timeout: float | None,
    ) -> tuple[Hold | None, bytes | None]:
        """Open a hold's session and ask the engine; (hold, None) or (None, error line)."""
        now = self._loop.time()
        error = self.keeper.admit(semaphore, key, limit, now, conn.token)
        if error is not None:
            return None, error
        lease = lease or self.settings.default_lease
        try:  # (what it makes is its token's: it counts against that token's quotas)
            info = self.host.execute(
                CreateSession(node_of(semaphore), self.keeper.key, None, SESSION_DESCRIPTION),
                conn.token,
            )
        except LimitExceededError as refusal:  # a quota of its token, or the memory budget
            log.info("dflockd: %s", refusal)
            self._refused(conn, refusal, "Acquire", key)
            return None, wire.ERROR
        hold = Hold(info.session_id, key, semaphore, lease, conn.conn_id)
        self.keeper.own(hold)
        try:
            if semaphore:
                with contextlib.suppress(AlreadyExistsError):
                    self.host.execute(CreateSemaphore(hold.session_id, key, limit, b""), conn.token)
            result = self.host.execute(
                Acquire(
                    hold.session_id,
                    key,
                    1 if semaphore else MAX_COUNT,
                    1,
                    b"dflockd",
                    timeout,
                    not semaphore,
                    float(lease),
                )
            )
        except LimitExceededError as refusal:
            self._end(hold)
            if "max_waiters" in str(refusal):
                return None, wire.ERROR_MAX_WAITERS
            if refusal.quota is not None:  # a quota of its token, or the memory budget
                log.info("dflockd: %s", refusal)
                self._refused(conn, refusal, "Acquire", key)
                return None, wire.ERROR
            return None, wire.ERROR_LIMIT_MISMATCH  # the key is a semaphore of another limit
        except TenureError:
            self._end(hold)
            log.exception("dflockd: acquire of %r failed", key)
            return None, wire.ERROR
        if result.status is AcquireStatus.GRANTED:
            assert result.token is not None
            self.holds.granted(hold, result.token)
        elif result.status is AcquireStatus.BUSY:
            self._end(hold)
            return None, wire.TIMEOUT
        else:
            hold.outcome = self._loop.create_future()
        return hold, None

    async def _acquire(self, conn: DflockdConn, request: wire.Acquire) -> bytes:
        hold, error = self._start(
            conn, request.key, request.semaphore, request.limit, request.lease, request.timeout
        )
        if hold is None:
            assert error is not None
            return error
        if not hold.granted and not await self._until_decided(conn, hold, None):
            self._end(hold)
            return wire.TIMEOUT
        return self._grant_line(hold, wire.granted)

    def _enqueue(self, conn: DflockdConn, request: wire.Enqueue) -> bytes:
        slot = (request.semaphore, request.key)
        if slot in conn.pending:
            return wire.ERROR_ALREADY_ENQUEUED
        hold, error = self._start(
            conn, request.key, request.semaphore, request.limit, request.lease, None
        )
        if hold is None:
            assert error is not None
            return error
        conn.pending[slot] = hold
        return self._grant_line(hold, wire.acquired) if hold.granted else wire.QUEUED

    async def _wait(self, conn: DflockdConn, request: wire.Wait) -> bytes:
        hold = conn.pending.pop((request.semaphore, request.key), None)
        if hold is None:
            return wire.ERROR_NOT_ENQUEUED
        if (
            not hold.granted
            and not hold.expired
            and not await self._until_decided(conn, hold, float(request.timeout))
            and not hold.granted  # a grant that raced the timeout wins
        ):
            self._end(hold)
            return wire.TIMEOUT
        if hold.expired or not hold.granted:
            self._end(hold)
            return wire.ERROR_LEASE_EXPIRED
        # The lease runs from now, as when a blocked `l` returns its grant.
        try:
            self.host.execute(Renew(hold.session_id, hold.key, float(hold.lease)))
        except TenureError:  # it ran out this very instant
            self._end(hold)
            return wire.ERROR_LEASE_EXPIRED
        return self._grant_line(hold, wire.granted)

    async def _until_decided(self, conn: DflockdConn, hold: Hold, timeout: float | None) -> bool:
        """Wait for the engine's verdict (or ``timeout``, or the peer leaving); granted?"""
        assert hold.outcome is not None
        reading = asyncio.ensure_future(conn.reader.read(READ_SIZE))
        try:
            waits: set[asyncio.Future[object]] = {hold.outcome, reading}  # type: ignore[arg-type]
            done, _ = await asyncio.wait(
                waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            if reading in done:
                data = reading.result()
                conn.codec.feed(data)
                if not data:  # the peer left while waiting: its waiter goes
                    conn.closing = True
                    return False
                await asyncio.wait({hold.outcome}, timeout=timeout)
        finally:
            if not reading.done():
                reading.cancel()
                with contextlib.suppress(asyncio.CancelledError, OSError):
                    await reading
        return hold.granted and not hold.expired

    def _grant_line(self, hold: Hold, render: Callable[[str, int], bytes]) -> bytes:
        assert hold.fence is not None
        return render(self.mint.token(hold.fence), hold.lease)

    # -- tokens -------------------------------------------------------------------------

    def _holder(self, key: str, token: str, semaphore: bool) -> Hold | None:
        fence = self.mint.fence(token)
        hold = None if fence is None else self.holds.by_fence.get(fence)
        if hold is None or hold.key != key or hold.semaphore != semaphore or hold.expired:
            return None
        return hold

    def _release(self, key: str, token: str, semaphore: bool) -> bytes:
        hold = self._holder(key, token, semaphore)
        if hold is None:
            return wire.ERROR
        self.keeper.touch(hold)
        self._end(hold)
        return wire.OK

    def _renew(self, key: str, token: str, semaphore: bool, lease: int | None) -> bytes:
        hold = self._holder(key, token, semaphore)
        if hold is None:
            return wire.ERROR
        seconds = lease or self.settings.default_lease
        try:
            self.host.execute(Renew(hold.session_id, key, float(seconds)))
        except TenureError:  # the lease ran out this very instant
            return wire.ERROR
        hold.lease = seconds
        self.keeper.touch(hold)
        return wire.renewed(seconds)

    # -- endings ------------------------------------------------------------------------

    def _end(self, hold: Hold) -> None:
        """Close the hold's engine session: released, withdrawn from the queue."""
        self.holds.forget(hold)
        self.keeper.disown(hold)
        with contextlib.suppress(TenureError):
            self.host.execute(CloseSession(hold.session_id))

    def disconnected(self, conn: DflockdConn) -> None:
        """The connection is over: its waiters go; its grants too if auto-release is on."""
        conn.closing = True
        self._open.pop(conn.conn_id, None)
        if self.draining or self.host.dead:
            return  # the server is stopping: the next start closes what is left
        for hold in self.holds.of_connection(conn.conn_id):
            if not hold.granted or self.settings.auto_release or hold.expired:
                self._end(hold)
            else:
                hold.conn_id = 0  # kept until its lease ends or its token releases it
        conn.pending.clear()

    def deliver(self, effect: Effect) -> None:
        """An engine effect for one of the face's sessions."""
        hold = self.holds.by_session.get(effect.session_id)
        if hold is None:
            return
        if isinstance(effect, Granted):
            self.holds.granted(hold, effect.token)
        elif isinstance(effect, LeaseLost | SessionEnded):
            hold.expired = True
            self.holds.forget(hold)
            self.keeper.disown(hold)
            if isinstance(effect, LeaseLost):  # the session itself is of no use now
                self._loop.call_soon(self._close_quietly, hold.session_id)
        elif isinstance(effect, AcquireFailed) and effect.code is not ErrorCode.TIMEOUT:
            hold.expired = True
        decided = isinstance(effect, Granted | AcquireFailed | LeaseLost | SessionEnded)
        if decided and hold.outcome is not None and not hold.outcome.done():
            hold.outcome.set_result(isinstance(effect, Granted))

    def _close_quietly(self, session_id: int) -> None:
        with contextlib.suppress(TenureError):
            self.host.execute(CloseSession(session_id))
