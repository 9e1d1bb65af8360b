"""``redis://``: the state lives in a Redis server (7.0 or newer), kept by Redis functions.

``redis://[user:password@]host[:port][/db]`` reaches one server; ``rediss://`` the
same over TLS. The coordination engine runs *in* Redis: one function library
(``lua/*.lua`` joined, loaded with ``FUNCTION LOAD``), one function per operation, so
every operation is atomic, and Redis's ``TIME`` decides every expiry and timeout.
The layout of the keys and how each guarantee is kept: ``docs/backends.md``.

Options, in the URL query or as keyword arguments of :func:`tenure.connect`
(keywords win): ``prefix`` (where the keys live, default ``tenure:``), ``db``
(or the URL's path), ``username`` and ``password`` (or the URL's), ``ca``,
``cert``, ``key`` (TLS and mTLS files; ``ca`` implies TLS), ``connect_timeout``
(seconds, default 5: how long a call without a session tries to reach Redis),
``request_timeout`` (seconds, default 5: how long one try waits for its answer),
``withdraw_wait`` (as every backend's: docs/backends.md, "Cancellation").

What Redis cannot do, said rather than weakened:

* **DURABLE** only on a server that runs ``appendonly yes`` with ``appendfsync
  always`` (read with ``CONFIG GET`` at connect; a server that refuses CONFIG is
  taken as not durable). **Never REPLICATED**: Redis replicates asynchronously, so
  a failover loses writes it acknowledged.
* **Eviction**: a server whose ``maxmemory-policy`` is ``allkeys-*`` is refused
  (it would silently drop lock state). tenure sets no TTL on any key, so the
  ``volatile-*`` policies never evict its keys (a full server then refuses writes,
  which tenure reports as UnavailableError).
* **Fencing tokens** come from a counter key of the node (``INCR``): strictly
  increasing as long as Redis keeps what it acknowledged (DURABLE). After a
  failover to a replica that missed the last writes, tokens may repeat.
* **One server**: Redis Cluster is not supported by this client (every key of a
  node shares one hash tag, ``{node}``, so the layout is cluster-safe).
* **No long_hold** (Capability.LONG_HOLDS): only a tenure server has a log and an
  audit log to tell of long holds in; a node with ``long_hold`` set is refused with
  UnsupportedError (so the functions keep no such setting).

Layer (CONTRIBUTING.md): its modules may import each other, tenure.backends,
tenure._core, tenure._url_options and tenure.errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from redis import exceptions as rexc

from tenure._core.claims import check_claim_id
from tenure._core.values import (
    MAX_RECOVERY_WINDOW,
    NodeConfig,
    NodeDescription,
    check_description,
    check_duration,
    check_identity,
    check_name,
)
from tenure.backends._base import Capability, SessionListener, SessionTicket
from tenure.backends._capability import refuse_long_hold
from tenure.backends._opener import NewSession, SessionFactory
from tenure.backends._session import StoreSession
from tenure.backends._session_class import session_class
from tenure.backends._store_listing import ListingModule, StoreListings
from tenure.backends._turns import Turns
from tenure.backends.redis import _listing
from tenure.backends.redis._codec import config_args, config_text, decode_config, decode_node
from tenure.backends.redis._conn import RedisFunctions
from tenure.backends.redis._inbox import NodeInbox
from tenure.backends.redis._store import RedisStore
from tenure.backends.redis._url import parse_url
from tenure.errors import (
    AuthenticationError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    SessionExpiredError,
    UnavailableError,
    UnsupportedError,
)

__all__ = ["CAPABILITIES", "RedisBackend", "open_backend"]

#: What redis:// always keeps (DURABLE joins on a server that fsyncs every write).
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
    }
)

#: How often alter_node reads and writes again when the settings changed between.
ALTER_TRIES: Final = 100


def node_base(prefix: str, node: str) -> str:
    """The prefix of every key of ``node``: ``<prefix>{<node>}:``.

    The braces make ``node`` the hash tag (one slot per node); braces and ``%``
    inside the name are %-escaped, so the tag is the whole name.
    """
    escaped = node.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return f"{prefix}{{{escaped}}}:"


class RedisBackend(StoreListings, SessionFactory):
    """A backend whose state lives in Redis (module docstring)."""

    scheme: ClassVar[str] = "redis"

    listing: ClassVar[ListingModule] = _listing  # its listings (StoreListings)

    def __init__(self, conn: RedisFunctions, capabilities: frozenset[Capability]) -> None:
        self.conn = conn
        self._capabilities = capabilities
        self.client_id = secrets.token_hex(8)
        self._requests = itertools.count(1)
        self.inboxes: dict[str, NodeInbox] = {}
        #: The stores of this client's live sessions, by (node base, session id).
        self.sessions: dict[tuple[str, int], RedisStore] = {}
        self._joins: Turns[tuple[str, str]] = Turns()
        self._closed = False

    @property
    def capabilities(self) -> frozenset[Capability]:
        """See :data:`CAPABILITIES` (DURABLE if the server fsyncs every write)."""
        return self._capabilities

    def base(self, node: str) -> str:
        """The key prefix of ``node`` (its name checked)."""
        return node_base(self.conn.options.prefix, check_name("node", node))

    def request_key(self) -> str:
        """A request key unique across clients (the answers kept for retries)."""
        return f"{self.client_id}.{next(self._requests)}"

    def inbox(self, base: str) -> NodeInbox:
        """This client's inbox of the node at ``base`` (made and read from if new)."""
        inbox = self.inboxes.get(base)
        if inbox is None:
            inbox = self.inboxes[base] = NodeInbox(self.conn, base, self.client_id)
            inbox.start()
        return inbox

    def joining(self, base: str, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while a request of this client joins ``name``'s queue.

        Requests of one client (of all its sessions) join a semaphore's queue one at
        a time, in the order they were made (turns are handed over first come, first
        served): each call is answered before the next is sent, so calls on
        different pooled connections cannot reach Redis the other way round, and
        FIFO holds down to this client's calls.
        """
        return self._joins.held((base, name))

    def session_ended(self, store: RedisStore) -> None:
        """A session ended (closed or lost): forget it."""
        if self.sessions.get((store.base, store.session_id)) is store:
            del self.sessions[store.base, store.session_id]

    # -- nodes -----------------------------------------------------------------------

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node: its settings' hash, if it is new."""
        if not isinstance(config, NodeConfig):
            raise InvalidArgumentError(f"config must be a NodeConfig, got {config!r}")
        config = config.validated()
        refuse_long_hold("redis", config.long_hold)  # (so the functions keep no long_hold)
        await self.conn.retrying(None, "create_node", self.base(name), *config_args(config), name)

    async def describe_node(self, name: str) -> NodeDescription:
        """A node's settings and counts, read in one call."""
        return decode_node(name, await self._describe(name))

    async def _describe(self, name: str) -> list[Any]:
        try:
            reply = await self.conn.retrying(None, "describe_node", self.base(name))
        except NotFoundError:
            raise NotFoundError(f"node {name!r} does not exist") from None
        return list(reply.result)

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change settings: read them, check the change, write if nobody changed them between."""
        bad = [key for key in changes if not isinstance(key, str)]
        if bad:
            raise InvalidArgumentError(f"node setting names must be strings, got {bad!r}")
        for _ in range(ALTER_TRIES):
            raw = await self._describe(name)
            new = decode_config(raw).replace(**changes)
            refuse_long_hold("redis", new.long_hold)
            old = config_text(raw)
            reply = await self.conn.retrying(
                None, "alter_node", self.base(name), *old, *config_args(new)
            )
            if reply.result != 0:
                return decode_node(name, list(reply.result))
        raise UnavailableError(f"node {name!r}: its settings kept changing; try again")

    async def release_claim(self, node: str, name: str, claim_id: str) -> bool:
        """One function, on Redis's clock (lua/70_claims.lua); its request key answers a
        retry after a lost answer as the first try was (True, not False)."""
        node, name = check_name("node", node), check_name("semaphore", name)
        claim_id = check_claim_id(claim_id)
        try:
            reply = await self.conn.retrying(
                None, "release_claim", self.base(node), name, claim_id, self.request_key()
            )
        except NotFoundError:
            raise NotFoundError(f"node {node!r} does not exist") from None
        return bool(reply.result)

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node (its sessions, if ``force``, are then lost)."""
        base = self.base(name)
        try:
            await self.conn.retrying(None, "drop_node", base, "1" if force else "0")
        except NotFoundError:
            raise NotFoundError(f"node {name!r} does not exist") from None
        except PreconditionFailedError:
            raise
        for (session_base, _), store in list(self.sessions.items()):
            if session_base == base:
                store.session.dropped()

    # -- sessions --------------------------------------------------------------------

    async def create_session(self, asked: NewSession, listener: SessionListener) -> StoreSession:
        """Open a session: its record, with a secret only this client knows."""
        node, timeout = asked.node, asked.timeout
        description, identity = asked.description, asked.identity
        base = self.base(node)
        check_description(description)
        check_identity(identity)
        window = ""
        if timeout is not None:
            window = repr(check_duration("recovery_window", timeout, maximum=MAX_RECOVERY_WINDOW))
        inbox = self.inbox(base)
        secret = secrets.token_hex(16)
        sent = asyncio.get_running_loop().time()
        try:
            reply = await self.conn.retrying(
                None,
                "open_session",
                base,
                self.request_key(),
                window,
                description,
                inbox.inbox,
                secret,
                identity.host,
                str(identity.pid),
                identity.name,
            )
        except NotFoundError:
            raise NotFoundError(f"node {node!r} does not exist") from None
        session_id, window_text, fresh = reply.result
        if fresh:
            inbox.renumbered()
        store = RedisStore(
            self,
            inbox,
            node,
            int(session_id),
            secret=secret,
            epoch=1,
            window=float(window_text),
            confirmed_at=sent,
        )
        return self._opened(store, listener)

    def _opened(self, store: RedisStore, listener: SessionListener) -> StoreSession:
        session = session_class(self._capabilities)(
            store,
            listener,
            acquiring=store.commands,
            admin=store.commands,
            watching=store.watches,
            scheme="redis",
            node=store.node,
            session_id=store.session_id,
            window=store.window,
            withdraw_wait=self.conn.options.withdraw_wait,
        )
        store.inbox.sessions[store.session_id] = store
        self.sessions[(store.base, store.session_id)] = store
        return session

    async def resume_session(
        self, node: str, ticket: SessionTicket, listener: SessionListener
    ) -> StoreSession:
        """Take back the live session the ticket names, by its secret.

        Its holds stay with their tokens (:meth:`RedisStore.taken_back`), its queued
        requests are withdrawn, and the client that had it is fenced off and told
        (``session_lost``). SessionExpiredError if it ended or the secret is wrong.
        """
        session_id, secret = ticket.session_id, ticket.secret.hex()
        base = self.base(node)
        inbox = self.inbox(base)
        sent = asyncio.get_running_loop().time()
        reply = await self.conn.retrying(
            None, "resume_session", base, str(session_id), secret, inbox.inbox
        )
        window_text, epoch, holds, fresh = reply.result
        if fresh:
            inbox.renumbered()
        stale = self.sessions.get((base, session_id))
        if stale is not None:  # this very client had it: the old object is fenced off
            stale.session.lose(SessionExpiredError(f"session {session_id} was resumed"))
        store = RedisStore(
            self,
            inbox,
            node,
            session_id,
            secret=secret,
            epoch=int(epoch),
            window=float(window_text),
            confirmed_at=sent,
        )
        session = self._opened(store, listener)
        session.adopt(store.taken_back(holds))
        return session

    async def aclose(self) -> None:
        """Close every session, then the links (deleting their inboxes) and the pool."""
        if self._closed:
            return
        self._closed = True
        for store in list(self.sessions.values()):
            with contextlib.suppress(Exception):
                await store.session.close()
        self.sessions.clear()
        for inbox in list(self.inboxes.values()):
            await inbox.close(delete_inbox=True)
        self.inboxes.clear()
        await self.conn.close()


async def _server_capabilities(conn: RedisFunctions) -> frozenset[Capability]:
    """Read the server's persistence and eviction settings: DURABLE, or a refusal."""
    client = conn.client
    try:
        memory = await client.info("memory")
        version = str((await client.info("server")).get("redis_version", "0"))
    except rexc.AuthenticationError as error:
        raise AuthenticationError(f"Redis at {conn.endpoint} refused the login: {error}") from None
    except rexc.NoPermissionError as error:
        raise PermissionDeniedError(
            f"Redis at {conn.endpoint} refused INFO ({error}): tenure reads it to check the "
            "eviction policy and the version; allow the user +info"
        ) from None
    except (rexc.RedisError, OSError) as error:
        raise UnavailableError(f"Redis at {conn.endpoint} unreachable: {error}") from None
    if int(version.split(".")[0]) < 7:
        raise UnsupportedError(f"redis:// needs Redis 7.0 or newer (functions); found {version}")
    policy = str(memory.get("maxmemory_policy", "noeviction"))
    if policy.startswith("allkeys-"):
        raise UnsupportedError(
            f"Redis at {conn.endpoint} runs maxmemory-policy {policy}: it would silently "
            "evict lock state; use noeviction (or a volatile-* policy)"
        )
    try:
        settings = await client.config_get("append*")
    except rexc.ResponseError:  # CONFIG refused (ACL, a managed service): not known durable
        return CAPABILITIES
    found = {_text(key): _text(value) for key, value in dict(settings).items()}
    if found.get("appendonly") == "yes" and found.get("appendfsync") == "always":
        return CAPABILITIES | {Capability.DURABLE}
    return CAPABILITIES


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def open_backend(url: str, options: Mapping[str, object]) -> RedisBackend:
    """Open ``redis://host[:port][/db]?options`` (``rediss://`` for TLS)."""
    conn = RedisFunctions(parse_url(url, options))
    try:
        capabilities = await _server_capabilities(conn)
        await conn.load()
    except BaseException:
        await conn.close()
        raise
    if conn.options.deadlock_search_limit == 0:  # ?deadlock_search_limit=0: no search
        capabilities -= {Capability.DEADLOCK_DETECTION}
    return RedisBackend(conn, capabilities)
