"""``memory://``: the engine in this process, for tests and single-process apps.

``memory://`` gives each client a private engine. ``memory://NAME`` shares one
engine among every client in the process (on the same event loop) that uses the
same NAME, so several clients can compete as separate processes would.

Options: ``clock=`` a :class:`~tenure.testing.FakeClock` (or any
:class:`~tenure._runtime.clock.Clock`) to drive expiry without sleeping;
``withdraw_wait=`` as every backend's (docs/backends.md, "Cancellation"). All clients of a
shared engine must pass the same clock.

Sessions here are attached for as long as their client is open: there is no
connection to lose. :func:`tenure.testing.disconnect` detaches one, as a dropped
connection would, so tests can watch its recovery window run out, and
:func:`tenure.testing.reconnect` re-attaches it and reads its state back, as a
client re-attaching to a server does (pushes lost on the way included).

No server here has a log or an audit log to tell of long holds in: a node created or
altered with ``long_hold`` set is refused with UnsupportedError (it lacks
``Capability.LONG_HOLDS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
import weakref
from collections.abc import Mapping
from typing import ClassVar, Final, TypeVar, cast
from urllib.parse import urlsplit

from tenure._core import (
    AlterNode,
    AttachSession,
    CancelWatch,
    CloseSession,
    Command,
    CreateNode,
    CreateSession,
    DescribeNode,
    DetachSession,
    DropNode,
    Effect,
    Engine,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    NodeDescription,
    Release,
    ReleaseClaim,
    ResumeSession,
    SessionInfo,
    TopNames,
    WhyName,
)
from tenure._core.top_report import TopReport
from tenure._core.values import SemaphoreSummary, SessionSummary, check_long_hold
from tenure._core.why_report import WhyReport
from tenure._runtime.clock import Clock, LoopClock
from tenure._runtime.host import Host
from tenure.backends._base import Capability, SessionListener, SessionTicket
from tenure.backends._capability import refuse_long_hold
from tenure.backends._engine import CommandStore, engine_session
from tenure.backends._opener import NewSession, SessionFactory
from tenure.backends._options import WITHDRAW_WAIT, shown_url, withdraw_wait
from tenure.backends._session import StoreSession
from tenure.backends._store import BoundSession
from tenure.backends._watch import EngineWatches
from tenure.errors import (
    InvalidArgumentError,
    LostError,
    SessionExpiredError,
    TenureError,
)

R = TypeVar("R")

CAPABILITIES: Final = frozenset(
    {
        Capability.FENCING_TOKENS,
        Capability.FIFO,
        Capability.RATE_RESERVATION,
        Capability.WATCH,
        Capability.SESSION_RECOVERY,
        Capability.LEASE_TTL,
        Capability.LOCK_DELAY,
        Capability.ALL_OR_NONE,
        Capability.PREFIX_WATCH,
        Capability.DEADLOCK_DETECTION,
        Capability.CLAIMS,
        Capability.HANDOFF,
        Capability.MAX_HOLD,
        Capability.WAIT_CHAINS,
        Capability.NAME_STATS,
    }
)

#: The scheme of this backend's session tickets.
SCHEME: Final = "memory"

# Shared engines by (event loop, name); an engine lives while a client uses it.
_SHARED: weakref.WeakValueDictionary[tuple[int, str], Host] = weakref.WeakValueDictionary()


class MemoryStore:
    """A session in the host of a :class:`MemoryBackend`: its
    :class:`~tenure.backends._store.Store`, and the
    :class:`~tenure.backends._engine.CommandChannel` of its :attr:`commands`.

    Calls go straight into the host, as long as the session is still this client's.
    A session resumed by another client (with its ticket) has a greater ``seq_no``
    in the engine than this one's: on a server the session would have moved to
    another connection, and this one's calls would be refused; here the same fence
    is the ``seq_no`` check.
    """

    where = "memory://"
    beat_period: float | None = None  # attached while its client is open: never in doubt

    def __init__(
        self, backend: MemoryBackend, session_id: int, *, secret: bytes, seq_no: int
    ) -> None:
        self.backend = backend
        self.session_id = session_id
        self.protection_key = secret
        self.seq_no = seq_no
        self.deaf = False  # its pushes are lost, as on a dead connection
        #: Its watches, and its acquires and semaphore calls.
        self.watches = EngineWatches(self, session_id)
        self.commands = CommandStore(self, session_id, watches=self.watches)
        self.session: BoundSession

    # -- the session's life (Store) ------------------------------------------------------

    def bind(self, session: BoundSession) -> None:
        """The session this store works for (its commands' and watches' too)."""
        self.session = session
        self.commands.bind(session)
        self.watches.bind(session)

    def confirmed_at(self) -> float:
        """Never in doubt."""
        return float("inf")

    async def heartbeat(self) -> None:
        """Nothing to send: the session is attached while its client is open."""

    def secret(self) -> bytes:
        """The session's protection key."""
        return self.protection_key

    def stop(self, error: LostError) -> None:
        """The session ended: every watch ends with ``error``."""
        self.watches.stop(error)

    async def close(self) -> None:
        """CloseSession (the session is gone if that fails)."""
        with contextlib.suppress(TenureError):
            self._apply(CloseSession(self.session_id))

    # -- the channel ---------------------------------------------------------------------

    async def call(self, command: Command[R]) -> R:
        """Apply ``command`` in the host, unless the session was resumed elsewhere.

        Then the session is lost (if it was not yet) and the call raises its loss;
        a close is dropped: the session is no longer this client's to end.
        """
        host = self.backend.host  # (_apply, inline: once per acquire)
        engine_session = host.engine.sessions.get(self.session_id)
        if engine_session is not None and engine_session.seq_no != self.seq_no:
            return self._fenced(command)
        return host.execute(command)

    def send_now(self, release: Release) -> asyncio.Future[bool] | None:
        """The Release applied now: its answer, as a future that is done already."""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        host = self.backend.host  # (_apply, inline: once per release)
        engine_session = host.engine.sessions.get(self.session_id)
        try:
            if engine_session is not None and engine_session.seq_no != self.seq_no:
                answer.set_result(self._fenced(release))
            else:
                answer.set_result(host.execute(release))
        except Exception as error:  # (the engine's refusal, or the session's loss)
            answer.set_exception(error)
        return answer

    def _apply(self, command: Command[R]) -> R:
        engine_session = self.backend.host.engine.sessions.get(self.session_id)
        if engine_session is not None and engine_session.seq_no != self.seq_no:
            return self._fenced(command)
        return self.backend.host.execute(command)

    def _fenced(self, command: Command[R]) -> R:
        """``command`` of a session resumed by another client (with its ticket): the
        session is lost, and the command raises that (a close is dropped)."""
        if isinstance(command, CloseSession):
            return cast(R, None)
        self.session.lose(
            SessionExpiredError(
                f"session {self.session_id} was resumed by another client (with its "
                "ticket): this client is fenced off"
            )
        )
        self.session.check_alive()
        return self.backend.host.execute(command)  # (not reached: check_alive raised)

    def hear(self, effect: Effect) -> None:
        """The sink of this session's effects (see :attr:`deaf`)."""
        if not self.deaf:
            self.commands.deliver(effect)


class MemoryBackend(SessionFactory):
    """A backend whose state lives in an in-process engine."""

    scheme: ClassVar[str] = SCHEME

    def __init__(
        self, host: Host, *, owns_host: bool = False, withdraw_wait: float = WITHDRAW_WAIT
    ) -> None:
        self.host = host
        self.withdraw_wait = withdraw_wait
        self._owns_host = owns_host
        self._sessions: dict[int, StoreSession] = {}
        self._closed = False

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Everything but durability: state ends with the process."""
        return CAPABILITIES

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node (not with a ``long_hold``: no server here tells of long holds)."""
        if isinstance(config, NodeConfig):  # (else the engine says what is wrong)
            refuse_long_hold(SCHEME, check_long_hold(config.long_hold))
        self.host.execute(CreateNode(name, config))

    async def describe_node(self, name: str) -> NodeDescription:
        """Describe a node."""
        return self.host.execute(DescribeNode(name))

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change node settings (not ``long_hold``: no server here tells of long holds)."""
        refuse_long_hold(SCHEME, check_long_hold(changes.get("long_hold")))
        return self.host.execute(AlterNode(name, dict(changes)))

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node."""
        self.host.execute(DropNode(name, force))

    async def create_session(self, asked: NewSession, listener: SessionListener) -> StoreSession:
        """Open an attached session (see :meth:`SessionFactory.open_session`)."""
        key = secrets.token_bytes(16)
        command = CreateSession(asked.node, key, asked.timeout, asked.description, asked.identity)
        return self._attached(asked.node, self.host.execute(command), key, listener)

    async def resume_session(
        self, node: str, ticket: SessionTicket, listener: SessionListener
    ) -> StoreSession:
        """Take a session back by its ticket, with its holds.

        A ticket works in every client of the same engine: ``memory://NAME`` clients
        of this process on this event loop (a private ``memory://`` has one client).
        """
        info = self.host.execute(ResumeSession(ticket.session_id, ticket.secret, node))
        session = self._attached(node, info, ticket.secret, listener)
        session.adopt(await self._store(info.session_id).commands.holds())
        return session

    def _attached(
        self, node: str, info: SessionInfo, key: bytes, listener: SessionListener
    ) -> StoreSession:
        store = MemoryStore(self, info.session_id, secret=key, seq_no=info.seq_no)
        session = engine_session(
            store, listener, SCHEME, node, info, self.withdraw_wait, CAPABILITIES
        )
        self._sessions[info.session_id] = session
        self.host.subscribe(info.session_id, store.hear)
        return session

    async def list_nodes(self, *, after: str, limit: int) -> list[str]:
        """A page of node names (see :meth:`tenure.backends._base.Backend.list_nodes`)."""
        return list(self.host.execute(ListNodes(after, limit)).names)

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """A page of the node's semaphores with names starting with ``prefix``."""
        return list(self.host.execute(ListSemaphores(node, prefix, after, limit)).semaphores)

    async def list_sessions(self, node: str, *, after: int, limit: int) -> list[SessionSummary]:
        """A page of the node's live sessions, by id."""
        return list(self.host.execute(ListSessions(node, after, limit)).sessions)

    async def kill_session(self, node: str, session_id: int) -> None:
        """End a live session as an expiry would (its client hears who ended it)."""
        self.host.execute(KillSession(node, session_id))

    async def why(self, node: str, name: str, *, after: int, limit: int) -> WhyReport:
        """Who blocks ``name`` of ``node`` (:meth:`tenure.backends.WaitChains.why`)."""
        return self.host.execute(WhyName(node, name, after, limit))

    async def top(self, node: str, *, window: float, sort: str, limit: int) -> TopReport:
        """The most contended names (:meth:`tenure.backends.NameStatistics.top`)."""
        return self.host.execute(TopNames(node, window, sort, limit))

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """Release a claim by its id (see :meth:`tenure.backends._base.Backend.release_claim`)."""
        return self.host.execute(ReleaseClaim(node, name, claim_id))

    async def aclose(self) -> None:
        """Close every session this backend opened."""
        self._closed = True
        for session_id, session in list(self._sessions.items()):
            if session.ended is None:
                await session.close()
            self.host.unsubscribe(session_id, self._store(session_id).hear)
        self._sessions.clear()
        if self._owns_host:
            self.host.close()

    # -- connection simulation, for tenure.testing ----------------------------------

    def detach(self, session_id: int, *, lose_pushes: bool = False) -> None:
        """Behave as if the session's connection dropped: its recovery window starts.

        ``lose_pushes``: the effects for the session are lost until it re-attaches,
        as pushes written to a dead connection are (else they still arrive).
        """
        self.host.execute(DetachSession(session_id))
        self._store(session_id).deaf = lose_pushes

    def reattach(self, session_id: int) -> None:
        """Behave as if the session's client reconnected and re-attached.

        As a client of a server does, the session then reads its state back and
        settles what it missed. If the session ended meanwhile, it is lost.
        """
        session, store = self._sessions[session_id], self._store(session_id)
        was_deaf, store.deaf = store.deaf, False
        store.seq_no += 1
        try:
            self.host.execute(AttachSession(session_id, store.protection_key, store.seq_no))
        except LostError as error:
            session.lose(error)
            return
        except TenureError as error:  # resumed elsewhere: a stale seq_no
            session.lose(SessionExpiredError(f"session {session_id} cannot re-attach: {error}"))
            return
        store.commands.reconcile_now(self.host.execute)
        if was_deaf:  # a firing may have been lost: every watcher reads the latest state
            for watch_id in store.watches.forget():
                with contextlib.suppress(TenureError):
                    self.host.execute(CancelWatch(session_id, watch_id))

    def _store(self, session_id: int) -> MemoryStore:
        store = self._sessions[session_id].store
        assert isinstance(store, MemoryStore)
        return store


async def open_backend(url: str, options: Mapping[str, object]) -> MemoryBackend:
    """Open ``memory://`` (private engine) or ``memory://NAME`` (shared in this process)."""
    parts = urlsplit(url)
    unknown = sorted(set(options) - {"clock", "withdraw_wait"})
    if unknown or parts.query or parts.path not in ("", "/"):
        raise InvalidArgumentError(
            "memory:// takes only an optional name and the clock= and withdraw_wait= options; "
            f"got {shown_url(url)} {unknown}"
        )
    wait = withdraw_wait(options)
    clock = options.get("clock") or LoopClock()
    if not isinstance(clock, Clock):
        raise InvalidArgumentError("clock= must have now() and call_at(when, callback)")
    name = parts.netloc
    if not name:
        return MemoryBackend(_host(clock), owns_host=True, withdraw_wait=wait)
    key = (id(asyncio.get_running_loop()), name)
    host = _SHARED.get(key)
    if host is None:
        host = _SHARED[key] = _host(clock)
    elif "clock" in options and host.clock is not clock:
        raise InvalidArgumentError(f"memory://{name} already runs on another clock")
    return MemoryBackend(host, withdraw_wait=wait)


def _host(clock: Clock) -> Host:
    """A host on ``clock``, whose wall clock moves with it.

    On a clock of the caller's (a FakeClock) the wall clock is the time of the
    start plus the clock's time since: a rate limiter's bucket and the times shown
    then follow the clock that drives expiry, as they follow the loop's otherwise.
    """
    engine = Engine()
    engine.ledger.pause_counting()  # (no quota, no budget here: no bookkeeping per change)
    if isinstance(clock, LoopClock):
        return Host(engine, clock)
    base, start = time.time(), clock.now()
    return Host(engine, clock, wall_clock=lambda: base + (clock.now() - start))
