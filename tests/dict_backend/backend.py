"""The dict backend's ``Backend``: ``open_backend(url, options)``, the entry point's module.

``dict://NAME`` reaches the state named NAME of this process (``dict://``: a state
of its own). It declares what its core keeps (fencing tokens, FIFO, watches pushed
as they happen) and no ability: its sessions implement the core alone, so lock_all,
lease TTLs, resume, claims, prefix watches and deadlock detection are refused with
UnsupportedError naming the capability, and rate limiters are reserved over the
core. It has no lock-delay and no lease TTL, so a node that asks for either is
refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tenure import ClientIdentity, NodeConfig, NodeDescription, SemaphoreSummary, SessionSummary
from tenure.backends import Capability, SessionListener, SessionTicket
from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    LeaseLostError,
    LimitExceededError,
    LostError,
    NotFoundError,
    PreconditionFailedError,
    SessionClosedError,
    SessionExpiredError,
    UnsupportedError,
)

from .session import DictSession
from .state import Holder, Node, Owner

#: What the core keeps here; no ability is declared (none is implemented).
CAPABILITIES = frozenset({Capability.FENCING_TOKENS, Capability.FIFO, Capability.WATCH})

#: The most a listing's page may hold (the contract's).
MAX_PAGE = 10_000


@dataclass(eq=False)
class DictState:
    """One named state: its nodes, their live sessions, and the backends open on it."""

    nodes: dict[str, Node] = field(default_factory=dict)
    sessions: dict[str, dict[int, DictSession]] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: Every node's tokens: one counter, so a node dropped and made again never
    #: gives a token it gave before.
    tokens: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    users: int = 0

    def node(self, name: str) -> Node:
        """The node ``name``; NotFoundError if missing."""
        node = self.nodes.get(name)
        if node is None:
            raise NotFoundError(f"node {name!r} does not exist")
        return node

    def changed(self, node: str, name: str) -> None:
        """The semaphore ``name`` of ``node`` changed: its watches wake."""
        for session in self.sessions.get(node, {}).values():
            for watch in session.watches:
                if watch.name == name:
                    watch.wake()

    def lost(self, node: str, owner: Owner, name: str, error: LostError) -> None:
        """A hold taken by a forced delete: its session's listener hears it."""
        session = self.sessions.get(node, {}).get(owner.holder.session_id)
        if session is not None and session.ended is None:
            session.listener.lease_lost(name, owner.token, error)


#: The states of this process, by name.
_STATES: dict[str, DictState] = {}


def _supported(config: NodeConfig) -> NodeConfig:
    unsupported = []
    if config.lock_delay:
        unsupported.append("lock_delay")
    if config.default_lease is not None:
        unsupported.append("default_lease")
    if config.max_hold is not None:
        unsupported.append("max_hold")
    if config.long_hold is not None:  # (it has no server log to tell of long holds in)
        raise UnsupportedError(
            "dict:// cannot tell of long holds (long_hold): a node's long_hold needs a "
            "tenure server (the capability long_holds)"
        )
    if unsupported:
        raise UnsupportedError(
            f"dict:// cannot honour {', '.join(unsupported)} "
            "(it lacks the capabilities lock_delay, lease_ttl and max_hold)"
        )
    return config


def _page(limit: int) -> None:
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgumentError(f"limit must be 1 to {MAX_PAGE}, got {limit!r}")


class DictBackend:
    """A :class:`tenure.backends.Backend` over a :class:`DictState`."""

    def __init__(self, key: str | None, state: DictState) -> None:
        self._key = key
        self.state = state
        self._mine: list[DictSession] = []
        self._closed = False

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What it promises: tokens, FIFO, watches; no ability."""
        return CAPABILITIES

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node; AlreadyExistsError if it exists."""
        if not isinstance(config, NodeConfig):
            raise InvalidArgumentError(f"config must be a NodeConfig, got {config!r}")
        _supported(config.validated())
        if name in self.state.nodes:
            raise AlreadyExistsError(f"node {name!r} already exists")
        state = self.state
        self.state.nodes[name] = Node(
            name,
            config,
            next_token=lambda: next(state.tokens),
            changed=lambda sem: state.changed(name, sem),
            lost=lambda owner, sem, error: state.lost(name, owner, sem, error),
        )
        self.state.sessions[name] = {}

    async def describe_node(self, name: str) -> NodeDescription:
        """A node's settings and counts."""
        node = self.state.node(name)
        return NodeDescription(
            name, node.config, len(self.state.sessions[name]), len(node.semaphores)
        )

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change some of a node's settings; the new description."""
        bad = [key for key in changes if not isinstance(key, str)]
        if bad:
            raise InvalidArgumentError(f"node setting names must be strings, got {bad!r}")
        node = self.state.node(name)
        node.config = _supported(node.config.replace(**changes))
        return await self.describe_node(name)

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node; with live sessions only if ``force`` (they are lost)."""
        node = self.state.node(name)
        sessions = self.state.sessions[name]
        if sessions and not force:
            raise PreconditionFailedError(
                f"node {name!r} has {len(sessions)} live session(s); use force=True"
            )
        del self.state.nodes[name]
        # As the engine tells it: each hold lost with the node, each wait failed (what
        # it waited for is gone), then the session closed (not expired).
        gone = f"node {name!r} was dropped"
        for sem in node.semaphores.values():  # (first: an end must not serve them)
            for waiter in sem.queue:
                if not waiter.done.done():
                    waiter.done.set_exception(NotFoundError(gone))
            sem.queue.clear()
        for session in list(sessions.values()):
            for sem_name, owner in session.owned():
                session.listener.lease_lost(sem_name, owner.token, LeaseLostError(gone))
            self._lose(session, SessionClosedError(gone), NotFoundError(gone))
        del self.state.sessions[name]

    async def open_session(
        self,
        node: str,
        *,
        timeout: float | None,
        description: str,
        listener: SessionListener,
        resume: SessionTicket | None = None,
        identity: ClientIdentity = ClientIdentity(),  # noqa: B008 (frozen)
    ) -> DictSession:
        """Open a session of ``node`` (no resume: that is SESSION_RECOVERY's)."""
        if resume is not None:
            raise UnsupportedError("dict:// cannot resume sessions (no session_recovery)")
        found = self.state.node(node)
        sessions = self.state.sessions[node]
        if len(sessions) >= found.config.max_sessions:
            raise LimitExceededError(f"max_sessions ({found.config.max_sessions}) reached")
        window = found.config.recovery_window if timeout is None else timeout
        holder = Holder(next(self.state.ids), description, identity)
        session = DictSession(found, holder, window, listener, sessions)
        sessions[holder.session_id] = session
        self._mine.append(session)
        return session

    def _lose(
        self, session: DictSession, error: LostError, wait_error: Exception | None = None
    ) -> None:
        """End ``session`` from outside: its listener hears ``error`` (its waits fail
        with ``wait_error``, if given)."""
        if session.ended is None:
            session.end(error, wait_error)
            session.listener.session_lost(error)

    async def list_nodes(self, *, after: str, limit: int) -> list[str]:
        """Node names after ``after``, sorted."""
        _page(limit)
        return sorted(name for name in self.state.nodes if name > after)[:limit]

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """Semaphores of ``node`` under ``prefix`` after ``after``, sorted by name."""
        _page(limit)
        found = self.state.node(node).semaphores
        names = sorted(n for n in found if n.startswith(prefix) and n > after)[:limit]
        return [
            SemaphoreSummary(
                n,
                found[n].limit,
                found[n].held(),
                len(found[n].owners),
                len(found[n].queue),
                found[n].ephemeral,
            )
            for n in names
        ]

    async def list_sessions(self, node: str, *, after: int, limit: int) -> list[SessionSummary]:
        """Live sessions of ``node`` after ``after``, sorted by id."""
        _page(limit)
        found = self.state.node(node)
        live = sorted(i for i in self.state.sessions[node] if i > after)[:limit]
        out = []
        for sid in live:
            s = self.state.sessions[node][sid]
            holds = sum(
                o.holder is s.holder for sem in found.semaphores.values() for o in sem.owners
            )
            waits = sum(
                w.holder is s.holder for sem in found.semaphores.values() for w in sem.queue
            )
            out.append(
                SessionSummary(
                    sid,
                    s.holder.description,
                    s.holder.identity,
                    s.recovery_window,
                    s.created_at,
                    None,
                    holds,
                    waits,
                )
            )
        return out

    async def kill_session(self, node: str, session_id: int) -> None:
        """End a live session as an operator does."""
        self.state.node(node)
        session = self.state.sessions[node].get(session_id)
        if session is None:
            raise NotFoundError(f"node {node!r} has no live session {session_id!r}")
        self._lose(session, SessionExpiredError(f"session {session_id} was ended by an operator"))

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """Claims are an ability this backend lacks."""
        raise UnsupportedError("dict:// has no claims (it lacks Capability.CLAIMS)")

    async def aclose(self) -> None:
        """Close the sessions it opened; the state goes with its last backend."""
        if self._closed:
            return
        self._closed = True
        for session in self._mine:
            await session.close()
        self.state.users -= 1
        if self._key is not None and self.state.users == 0:
            _STATES.pop(self._key, None)


async def open_backend(url: str, options: Mapping[str, object]) -> DictBackend:
    """Open ``dict://NAME`` (the entry point's function); it takes no options."""
    if options:
        raise InvalidArgumentError(f"dict:// takes no options, got {sorted(options)}")
    parts = urlsplit(url)
    name = parts.netloc + parts.path
    state = _STATES.setdefault(name, DictState()) if name else DictState()
    state.users += 1
    return DictBackend(name or None, state)
