"""``etcd://``: the state lives in an etcd cluster, with no tenure server in between.

``etcd://h1:2379,h2:2379,h3:2379`` reaches a cluster (any member; the client fails
over between the endpoints given); ``etcds://`` the same over TLS. Like etcd's Go
``concurrency`` package, the client does the coordination itself with keys,
leases, Txns and watches (the layout: :mod:`tenure.backends.etcd._keys`).

Options, in the URL query or as keyword arguments of :func:`tenure.connect`
(keywords win): ``prefix`` (where the keys live, default ``/tenure/``), ``user``
and ``password`` (etcd auth), ``ca``, ``cert``, ``key`` (TLS and mTLS files; ``ca``
implies TLS), ``server_hostname`` (the name the members' certificates carry),
``connect_timeout`` (seconds, default 5: how long a call tries the endpoints),
``request_timeout`` (seconds, default 5: how long one try waits for its answer),
``withdraw_wait`` (as every backend's: docs/backends.md, "Cancellation").

What etcd cannot do exactly, said rather than weakened:

* **Recovery windows are whole seconds, at least 2** (etcd's lease granularity):
  a session's lease TTL is its window rounded up, and ``Session.recovery_window``
  says the window in force. A leader change renews every lease to its full TTL, and so does a
  restart of the whole cluster (even a lease whose TTL ran out while it was down),
  so the window is a lower bound there; the client still gives a session up on its
  own clock a TTL after the last renewal etcd answered.
* **Acquire timeouts run on the client's clock** (etcd has no timer for them): the
  request is withdrawn when its timeout passes on the client's monotonic clock.
* **No lock-delay and no per-grant TTL**: a node with ``lock_delay`` > 0 or a
  ``default_lease`` is refused with UnsupportedError (etcd would delete the keys
  of a failed holder at once; nobody is there to hold them back).
* **No max_hold** (Capability.MAX_HOLD): an acquire's ``max_hold`` and a node's are
  refused with UnsupportedError. A grant's end on etcd's clock would be an etcd lease
  of its own, and a leader change (or a restart of the cluster) renews every lease
  to its full TTL: a grant could outlive its bound by up to a whole ``max_hold``,
  which the capability promises never happens.
* **No long_hold** (Capability.LONG_HOLDS): a node with ``long_hold`` set is refused
  with UnsupportedError; only a tenure server has a log and an audit log to tell of
  long holds in.
* **Limits** (``max_sessions``, ``max_semaphores``, ``max_waiters``) are checked
  on what the change's own Txn reads (or a count right after it), and a change
  that went past one is undone and refused: two clients racing for the last place
  may both be refused, but never one too many is kept.
* **lock_all** joins every name's queue in one Txn (one arrival, as on the engine),
  but grants its names one Txn each (each grant is a revision, so each name gets a
  token of its own, ascending in the names' order): N round trips for N free names
  where the engine takes one step, and a moment in which others may see some of
  the names held and not yet the rest (nobody else can take them meanwhile).
  The Txn carries the owner data once per name (N times it must fit etcd's
  ``--max-request-bytes``).
* **Fencing tokens** are etcd revisions: a cluster restored from a snapshot must be
  started with ``etcdutl snapshot restore --bump-revision`` (and
  ``--mark-compacted``), or tokens repeat.

Layer (CONTRIBUTING.md): its modules may import each other, tenure.backends,
tenure._core, tenure._etcd, tenure._url_options and tenure.errors; never
tenure.backends._engine or tenure._core.engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any, ClassVar, Final

from aetcd.rpc import rpc_pb2

from tenure._core.claims import check_claim_id
from tenure._core.stored_config import config_to_stored
from tenure._core.values import (
    NodeConfig,
    NodeDescription,
    SemaphoreSummary,
    SessionSummary,
    check_description,
    check_identity,
    check_name,
)
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import (
    compare_create,
    compare_mod,
    delete_prefix,
    get,
    get_prefix,
    prefix_end,
    put,
)
from tenure._etcd.streams import KeepAlive, WatchHub
from tenure.backends._base import Capability, SessionListener, SessionTicket
from tenure.backends._capability import refuse_long_hold
from tenure.backends._opener import NewSession, SessionFactory
from tenure.backends._session import StoreSession
from tenure.backends._session_class import session_class
from tenure.backends._turns import Turns
from tenure.backends.etcd import _listing, _resume
from tenure.backends.etcd._claims import release_claim
from tenure.backends.etcd._feed import Feeds
from tenure.backends.etcd._hints import Hints
from tenure.backends.etcd._keys import Layout, encode
from tenure.backends.etcd._node import NodeView, NodeViews, config_of
from tenure.backends.etcd._opening import Opened, lease_ttl, open_new, revoke
from tenure.backends.etcd._store import EtcdStore, compose
from tenure.backends.etcd._url import parse_url
from tenure.errors import (
    AlreadyExistsError,
    InvalidArgumentError,
    NotFoundError,
    PreconditionFailedError,
    UnsupportedError,
)

__all__ = ["CAPABILITIES", "EtcdBackend", "lease_ttl", "open_backend"]

CAPABILITIES: Final = frozenset(
    {
        Capability.FENCING_TOKENS,
        Capability.FIFO,
        Capability.WATCH,
        Capability.DURABLE,
        Capability.REPLICATED,
        Capability.SESSION_RECOVERY,
        Capability.ALL_OR_NONE,
        Capability.PREFIX_WATCH,
        Capability.CLAIMS,
    }
)


def _refuse_unsupported(config: NodeConfig) -> None:
    refuse_long_hold("etcd", config.long_hold)
    unsupported = []
    if config.lock_delay > 0:
        unsupported.append(f"lock_delay={config.lock_delay:g}")
    if config.default_lease is not None:
        unsupported.append(f"default_lease={config.default_lease:g}")
    if config.max_hold is not None:
        unsupported.append(f"max_hold={config.max_hold:g}")
    if unsupported:
        raise UnsupportedError(
            f"etcd:// cannot honour {', '.join(unsupported)} (it lacks the capabilities "
            "lock_delay, lease_ttl and max_hold)"
        )


def _config_value(config: NodeConfig) -> bytes:
    # The JSON keeps the names it always had (session_timeout): see _core.stored_config.
    return encode(config_to_stored(config))


class EtcdBackend(SessionFactory):
    """A backend whose state lives in etcd."""

    scheme: ClassVar[str] = "etcd"

    def __init__(self, conn: EtcdClient, layout: Layout, withdraw_wait: float) -> None:
        self.conn = conn
        self.layout = layout
        #: The sessions' ``withdraw_wait`` (the URL's option).
        self.withdraw_wait = withdraw_wait
        self.keepalive = KeepAlive(conn)
        self.watches = WatchHub(conn)
        #: The stores of this client's live sessions, by lease id.
        self.sessions: dict[int, EtcdStore] = {}
        #: This client's feeds of the semaphores its requests wait on.
        self.feeds = Feeds(conn, self.watches)
        #: What an acquire assumes of a semaphore (its Txn compares it).
        self.hints = Hints()
        #: The nodes this client has sessions on (:mod:`tenure.backends.etcd._node`).
        self.views = NodeViews(conn, self.watches, layout, self._members)
        #: Requests of one client (of all its sessions) join a semaphore's queue one at
        #: a time, in the order they were made: each Txn is answered before the next is
        #: sent, so etcd cannot order two of them the other way round, and FIFO holds
        #: down to this client's calls.
        self.turns: Turns[bytes] = Turns()
        self._closed = False

    def _members(self, node: str) -> list[EtcdStore]:
        """This client's live sessions on ``node`` (what its view tells)."""
        return [s for s in self.sessions.values() if s.node == node]

    def session_ended(self, store: EtcdStore) -> None:
        """``store``'s session ended (its :class:`~tenure.backends.etcd._store.EtcdHome`):
        forget it, and let go of its node's view."""
        if self.sessions.get(store.lease_id) is store:
            del self.sessions[store.lease_id]
        self.views.release(store.view)

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Replicated and durable; no lease TTLs (see the module docstring)."""
        return CAPABILITIES

    async def _read_config(self, name: str) -> tuple[NodeConfig, Any]:
        reply = await self.conn.range(rpc_pb2.RangeRequest(key=self.layout.config(name)))
        if not reply.kvs:
            raise NotFoundError(f"node {name!r} does not exist")
        return config_of(reply.kvs[0]), reply.kvs[0]

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node: its settings' key, if it is new."""
        if not isinstance(config, NodeConfig):
            raise InvalidArgumentError(f"config must be a NodeConfig, got {config!r}")
        config = config.validated()
        _refuse_unsupported(config)
        key = self.layout.config(name)
        reply = await self.conn.txn([compare_create(key, 0)], [put(key, _config_value(config))])
        if not reply.succeeded:
            raise AlreadyExistsError(f"node {name!r} already exists")

    async def describe_node(self, name: str) -> NodeDescription:
        """A node's settings and counts, read at one revision."""
        layout = self.layout
        reply = await self.conn.txn(
            [],
            [
                get(layout.config(name)),
                get_prefix(layout.sessions(name), count_only=True),
                get_prefix(layout.semaphores(name), keys_only=True),
            ],
        )
        config = reply.responses[0].response_range.kvs
        if not config:
            raise NotFoundError(f"node {name!r} does not exist")
        prefix = layout.semaphores(name)
        names = {
            bytes(kv.key)[len(prefix) :].split(b"/")[0]
            for kv in reply.responses[2].response_range.kvs
        }
        return NodeDescription(
            name,
            config_of(config[0]),
            int(reply.responses[1].response_range.count),
            len(names),
        )

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change settings with a Txn that compares the settings' mod_revision."""
        bad = [key for key in changes if not isinstance(key, str)]
        if bad:
            raise InvalidArgumentError(f"node setting names must be strings, got {bad!r}")
        while True:
            config, kv = await self._read_config(name)
            new = config.replace(**changes)
            _refuse_unsupported(new)
            key = self.layout.config(name)
            reply = await self.conn.txn(
                [compare_mod(key, int(kv.mod_revision))], [put(key, _config_value(new))]
            )
            if reply.succeeded:
                return await self.describe_node(name)

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """See :func:`tenure.backends.etcd._claims.release_claim` (no session: the
        claim's keys put again on its at_least lease, or deleted)."""
        node, name = check_name("node", node), check_name("semaphore", name)
        claim_id = check_claim_id(claim_id)
        return await release_claim(self.conn, self.layout, node, name, claim_id)

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node: revoke its sessions' leases (if ``force``), delete its keys."""
        while True:
            _, kv = await self._read_config(name)
            reply = await self.conn.range(
                rpc_pb2.RangeRequest(
                    key=self.layout.sessions(name),
                    range_end=prefix_end(self.layout.sessions(name)),
                    keys_only=True,
                )
            )
            sids = [int(bytes(k.key).rsplit(b"/", 1)[1], 16) for k in reply.kvs]
            if sids and not force:
                raise PreconditionFailedError(
                    f"node {name!r} has {len(sids)} live session(s); use force=True"
                )
            # Delete first (one Txn: the node is gone at once for everyone), then revoke
            # the leases, so no session can act between.
            key = self.layout.config(name)
            reply = await self.conn.txn(
                [compare_create(key, int(kv.create_revision))],
                [delete_prefix(self.layout.node(name))],
            )
            if reply.succeeded:
                break
        for sid in sids:
            local = self.sessions.get(sid)
            if local is not None:
                local.session.dropped()
            await revoke(self.conn, sid)

    async def create_session(self, asked: NewSession, listener: SessionListener) -> StoreSession:
        """Open a session: grant a lease, put the session's record on it."""
        check_description(asked.description)
        check_identity(asked.identity)
        return await self._open_in_view(
            asked.node, listener, partial(open_new, self.conn, self.layout, asked)
        )

    async def resume_session(
        self, node: str, ticket: SessionTicket, listener: SessionListener
    ) -> StoreSession:
        """Take the ticket's live session back (:mod:`tenure.backends.etcd._resume`)."""
        take = partial(_resume.take, self.conn, self.layout, self.keepalive, node, ticket=ticket)
        session = await self._open_in_view(node, listener, take)
        store = session.store
        assert isinstance(store, EtcdStore)
        try:
            session.adopt(await store.holding.take_back())
        except BaseException:
            await session.close()
            raise
        return session

    async def _open_in_view(
        self, node: str, listener: SessionListener, opening: Callable[[NodeView], Awaitable[Opened]]
    ) -> StoreSession:
        view = await self.views.take(node)
        try:
            opened = await opening(view)
        except BaseException:
            self.views.release(view)  # (once made, the session releases it as it ends)
            raise
        return self._opened(opened, view, listener)

    def _opened(self, opened: Opened, view: NodeView, listener: SessionListener) -> StoreSession:
        store = compose(
            self,
            opened,
            view,
            conn=self.conn,
            layout=self.layout,
            keepalive=self.keepalive,
            hub=self.watches,
            feeds=self.feeds,
            hints=self.hints,
            turns=self.turns,
        )
        session = session_class(CAPABILITIES)(
            store,
            listener,
            acquiring=store,
            admin=store.admin,
            watching=store.admin,
            scheme="etcd",
            node=opened.record.node,
            session_id=store.lease_id,
            window=float(opened.ttl),
            withdraw_wait=self.withdraw_wait,
        )
        self.sessions[store.lease_id] = store
        self.keepalive.add(store)
        return session

    async def list_nodes(self, *, after: str, limit: int) -> list[str]:
        """See :func:`tenure.backends.etcd._listing.list_nodes`."""
        return await _listing.list_nodes(self.conn, self.layout, after, limit)

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """See :func:`tenure.backends.etcd._listing.list_semaphores`."""
        return await _listing.list_semaphores(self.conn, self.layout, node, prefix, after, limit)

    async def list_sessions(self, node: str, *, after: int, limit: int) -> list[SessionSummary]:
        """See :func:`tenure.backends.etcd._listing.list_sessions`."""
        return await _listing.list_sessions(self.conn, self.layout, node, after, limit)

    async def kill_session(self, node: str, session_id: int) -> None:
        """See :func:`tenure.backends.etcd._listing.kill_session`; a session of this very
        client hears it now."""
        await _listing.kill_session(self.conn, self.layout, node, session_id)
        local = self.sessions.get(session_id)
        if local is not None:
            await local.record.diagnose()

    async def aclose(self) -> None:
        """Close every session (revoking its lease), then the streams and the channel."""
        self._closed = True
        for store in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                await store.session.close()
        self.sessions.clear()
        self.feeds.close()
        self.views.close()
        await self.keepalive.close()
        await self.watches.close()
        await self.conn.close()


async def open_backend(url: str, options: Mapping[str, object]) -> EtcdBackend:
    """Open ``etcd://host[:port][,...]?options`` (``etcds://`` for TLS)."""
    parsed = parse_url(url, options)
    conn = EtcdClient(parsed.client)
    try:
        await conn.authenticate()
        # One cheap read proves the cluster answers (and our rights on the prefix).
        await conn.range(rpc_pb2.RangeRequest(key=parsed.prefix.encode(), count_only=True))
    except BaseException:
        await conn.close()
        raise
    return EtcdBackend(conn, Layout(parsed.prefix.encode()), parsed.withdraw_wait)
