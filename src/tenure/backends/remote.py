"""``tenure://``: the state lives in ``tenure serve`` processes.

``tenure://host:port`` reaches one server; ``tenures://`` the same over TLS.
Several servers, ``tenure://h1:6388,h2:6388``, are independent shards: each node
lives on exactly one of them, chosen by rendezvous hashing of the node's name over
the server addresses as written. Every client must list the same servers (in any
order); adding a server moves only the nodes that hash to it. Sharding spreads
load; it does not replicate (high availability is the etcd backend's job).

Options, in the URL query or as keyword arguments of :func:`tenure.connect`
(keywords win): ``token`` (the server's auth token), ``ca`` (a CA file to trust;
implies TLS), ``cert`` and ``key`` (a client certificate, for mTLS),
``server_hostname`` (the name the server's certificate must carry),
``ssl`` (a ready :class:`ssl.SSLContext`, keyword only), ``connect_timeout``
(seconds, default 5), ``client_name`` (shown in the server's logs) and
``withdraw_wait`` (as every backend's: docs/backends.md, "Cancellation").

Each server gets one multiplexed, pipelined connection (see
:mod:`tenure.backends._link`); sessions survive its loss for their recovery window
(:mod:`tenure.backends._remote_session`).
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import secrets
import ssl
from collections.abc import Mapping
from typing import Final, TypeVar
from urllib.parse import parse_qsl, urlsplit

from tenure._core import (
    AlterNode,
    CreateNode,
    CreateSession,
    DescribeNode,
    DropNode,
    KillSession,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    NodeDescription,
    ResumeSession,
)
from tenure._core.values import NO_IDENTITY, ClientIdentity, SemaphoreSummary, SessionSummary
from tenure.backends._base import Capability, SessionListener, SessionTicket, check_ticket
from tenure.backends._link import Endpoint, LinkOptions
from tenure.backends._options import WITHDRAW_WAIT, withdraw_wait
from tenure.backends._remote_session import RemoteStore, Shard
from tenure.backends._session import StoreSession
from tenure.errors import (
    ClientClosedError,
    InvalidArgumentError,
)

R = TypeVar("R")

DEFAULT_PORT: Final = 6388

CAPABILITIES: Final = frozenset(
    {
        Capability.FENCING_TOKENS,
        Capability.FIFO,
        Capability.WATCH,
        Capability.DURABLE,
        Capability.SESSION_RECOVERY,
        Capability.LEASE_TTL,
        Capability.LOCK_DELAY,
    }
)

_OPTIONS: Final = frozenset(
    {
        "token",
        "ca",
        "cert",
        "key",
        "server_hostname",
        "ssl",
        "connect_timeout",
        "client_name",
        "withdraw_wait",
    }
)


class TenureBackend:
    """A backend whose state lives in one or more ``tenure serve`` processes."""

    def __init__(self, shards: list[Shard], *, withdraw_wait: float = WITHDRAW_WAIT) -> None:
        self.shards = shards
        self.withdraw_wait = withdraw_wait
        self._closed = False

    @property
    def capabilities(self) -> frozenset[Capability]:
        """Everything: the server journals state, so it survives restarts."""
        return CAPABILITIES

    def shard_for(self, node: str) -> Shard:
        """The shard that holds ``node`` (rendezvous hashing; stable across clients)."""
        if len(self.shards) == 1:
            return self.shards[0]

        def weight(shard: Shard) -> bytes:
            key = f"{shard.link.endpoint}\0{node}".encode("utf-8", "surrogatepass")
            return hashlib.blake2b(key, digest_size=8).digest()

        return max(self.shards, key=weight)

    async def create_node(self, name: str, config: NodeConfig) -> None:
        """Create a node on its shard."""
        await self.shard_for(name).call(CreateNode(name, config), resend=False)

    async def describe_node(self, name: str) -> NodeDescription:
        """Describe a node."""
        return await self.shard_for(name).call(DescribeNode(name), resend=True)

    async def alter_node(self, name: str, changes: Mapping[str, object]) -> NodeDescription:
        """Change node settings."""
        return await self.shard_for(name).call(AlterNode(name, dict(changes)), resend=True)

    async def drop_node(self, name: str, force: bool) -> None:
        """Drop a node."""
        await self.shard_for(name).call(DropNode(name, force), resend=False)

    async def list_nodes(self, *, after: str, limit: int) -> list[str]:
        """A page of node names: each shard's page, merged (a node lives on one shard)."""
        pages = [await shard.call(ListNodes(after, limit), resend=True) for shard in self.shards]
        return heapq.nsmallest(limit, {name for page in pages for name in page.names})

    async def list_semaphores(
        self, node: str, *, prefix: str, after: str, limit: int
    ) -> list[SemaphoreSummary]:
        """A page of the node's semaphores (from the node's shard)."""
        command = ListSemaphores(node, prefix, after, limit)
        return list((await self.shard_for(node).call(command, resend=True)).semaphores)

    async def list_sessions(self, node: str, *, after: int, limit: int) -> list[SessionSummary]:
        """A page of the node's live sessions (from the node's shard)."""
        command = ListSessions(node, after, limit)
        return list((await self.shard_for(node).call(command, resend=True)).sessions)

    async def kill_session(self, node: str, session_id: int) -> None:
        """End a live session as an expiry would (needs a read-write token).

        Not sent again after a lost connection: the first may have ended it already,
        and a second would then say NotFoundError.
        """
        await self.shard_for(node).call(KillSession(node, session_id), resend=False)

    async def open_session(
        self,
        node: str,
        *,
        timeout: float | None,
        description: str,
        listener: SessionListener,
        resume: SessionTicket | None = None,
        identity: ClientIdentity = NO_IDENTITY,
    ) -> StoreSession:
        """Open a session on the node's shard (a session lost in transit expires there).

        With ``resume``, take the ticket's session back (ResumeSession, sent again
        after a lost connection: taking it twice is taking it once): the server
        moves it to this connection, withdraws its waits, and tells its previous
        connection that it ended; this client then owns its holds.
        """
        if self._closed:
            raise ClientClosedError("the client is closed")
        shard = self.shard_for(node)
        if resume is None:
            key = secrets.token_bytes(16)
            create = CreateSession(node, key, timeout, description, identity)
            info = await shard.call(create, resend=True)
        else:
            check_ticket(resume, "tenure", node)
            key = resume.secret
            command = ResumeSession(resume.session_id, key, node)
            info = await shard.call(command, resend=True)
        store = RemoteStore(shard, info, key)
        session = StoreSession(
            store,
            listener,
            scheme="tenure",
            node=node,
            session_id=info.session_id,
            window=info.timeout,
            withdraw_wait=self.withdraw_wait,
        )
        shard.sessions[info.session_id] = store
        if resume is not None:
            try:
                session.adopt(await store.holds())
            except BaseException:
                await session.close()
                raise
        return session

    async def aclose(self) -> None:
        """Close every session, then every connection."""
        if self._closed:
            return
        self._closed = True
        stores = [store for shard in self.shards for store in shard.sessions.values()]
        await asyncio.gather(*(store.owner.close() for store in stores), return_exceptions=True)
        for shard in self.shards:
            await shard.aclose()


def _endpoints(url: str, context: ssl.SSLContext | None, hostname: str | None) -> list[Endpoint]:
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.fragment or "@" in parts.netloc:
        raise InvalidArgumentError(
            f"expected tenure://host:port[,host:port...][?options], got {url!r}"
        )
    endpoints = []
    for item in parts.netloc.split(","):
        try:
            one = urlsplit(f"//{item.strip()}")
            host, port = one.hostname, one.port or DEFAULT_PORT
        except ValueError as error:
            raise InvalidArgumentError(f"bad server address {item!r} in {url!r}: {error}") from None
        if not host:
            raise InvalidArgumentError(f"a server address in {url!r} has no host")
        endpoints.append(Endpoint(host, port, context, hostname or host if context else None))
    if len({str(e) for e in endpoints}) != len(endpoints):
        raise InvalidArgumentError(f"a server is listed twice in {url!r}")
    return endpoints


def _tls_context(scheme: str, options: Mapping[str, object]) -> ssl.SSLContext | None:
    given = options.get("ssl")
    if given is not None:
        if not isinstance(given, ssl.SSLContext):
            raise InvalidArgumentError("ssl= must be an ssl.SSLContext")
        return given
    ca, cert, key = (options.get(name) for name in ("ca", "cert", "key"))
    if scheme == "tenure" and ca is None and cert is None:
        return None
    try:
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if cert is not None:
            context.load_cert_chain(str(cert), str(key) if key else None)
    except (OSError, ssl.SSLError) as error:
        raise InvalidArgumentError(f"cannot load the TLS files: {error}") from None
    return context


async def open_backend(url: str, options: Mapping[str, object]) -> TenureBackend:
    """Open ``tenure://`` or ``tenures://`` (TLS) servers; connect to every one."""
    scheme = urlsplit(url).scheme.lower()
    merged: dict[str, object] = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    merged.update(options)
    unknown = sorted(set(merged) - _OPTIONS)
    if unknown:
        raise InvalidArgumentError(
            f"{scheme}:// does not know the options {unknown}; known: {sorted(_OPTIONS)}"
        )
    try:
        timeout = float(str(merged.get("connect_timeout", 5.0)))
    except ValueError:
        raise InvalidArgumentError("connect_timeout must be a number of seconds") from None
    if not 0 < timeout < float("inf"):
        raise InvalidArgumentError("connect_timeout must be a positive number of seconds")
    wait = withdraw_wait(merged)
    token = merged.get("token")
    link_options = LinkOptions(
        token=None if token is None else str(token),
        client_name=str(merged.get("client_name", "tenure-python")),
        connect_timeout=timeout,
    )
    hostname = merged.get("server_hostname")
    context = _tls_context(scheme, merged)
    endpoints = _endpoints(url, context, None if hostname is None else str(hostname))
    shards = [Shard(endpoint, link_options) for endpoint in endpoints]
    opened: list[Shard] = []
    try:
        for shard in shards:
            await shard.link.open()
            opened.append(shard)
    except BaseException:
        for shard in opened:
            await shard.aclose()
        raise
    return TenureBackend(shards, withdraw_wait=wait)


__all__ = ["CAPABILITIES", "Shard", "TenureBackend", "open_backend"]
