"""YDB's calls that are not coordination: discovery and logins; and where clients go.

* ``Ydb.Discovery.V1.DiscoveryService/ListEndpoints``: the one endpoint of the
  database it answers for (YDB's SDKs discover the endpoints of a database first,
  then connect to them): this server, or in a cluster the leader's YDB endpoint,
  whichever member is asked; ``WhoAmI``: the token a call acts as.
* ``Ydb.Auth.V1.AuthService/Login``: static credentials (:mod:`.tickets`).

In a cluster (``tenure serve --cluster``) only the leader serves coordination;
:meth:`Directory.elsewhere` says why a call is not served here, and the face ends it
with gRPC ``UNAVAILABLE`` (docs/ydb.md, "In a cluster", says why that status).
"""

from __future__ import annotations

import socket
import zlib
from collections.abc import Callable
from typing import Any, Final

from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.paths import split_advertised
from tenure.compat.ydb.settings import SETTINGS
from tenure.compat.ydb.tickets import Tickets, UnauthorizedError
from tenure.server.plug import Role, ServeConfig

#: The addresses that mean "every interface" (not one a client can dial).
_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::", "[::]"})
#: Why discovery has no endpoint to give (answered UNAVAILABLE: see list_endpoints).
NO_LEADER: Final = "no leader of the cluster is known here yet"
#: The node id of a server that is not part of a cluster (its one node).
STANDALONE_NODE_ID: Final = 1


class Directory:
    """Discovery and logins for the YDB face, and where its clients go.

    ``port()`` is the port the face listens on; ``role`` this server's part in its
    cluster (None: not part of one); ``draining()`` whether this server is stopping;
    ``peer(context)`` the client of a call (gRPC's ``context.peer()`` as is, unless the
    server relays the connections: :class:`tenure.server.plug.Front`).
    """

    def __init__(
        self,
        config: ServeConfig,
        tickets: Tickets,
        port: Callable[[], int],
        role: Role | None = None,
        draining: Callable[[], bool] = lambda: False,
        peer: Callable[[Any], str] = lambda context: str(context.peer()),
    ) -> None:
        self.config = config
        self.settings = config.face(SETTINGS)
        self._peer = peer
        self.tickets = tickets
        self._port = port
        self.role = role
        self._draining = draining

    def member(self) -> Role | None:
        """This server's role when it is a member of a cluster (None: it is not)."""
        role = self.role
        return role if role is not None and role.name else None  # (name "": standalone)

    def endpoint(self) -> tuple[str, int, int] | None:
        """Where the database's clients go: (host, port, node id); None when this
        member of a cluster knows of no leader with a YDB endpoint (or is stepping down)."""
        role = self.member()
        if role is None:
            host, port = advertised(self.config.host, self.settings.advertise)
            return host, port or self._port(), STANDALONE_NODE_ID
        if role.leading and self._draining():
            return None  # a leader stepping down: whoever follows is not known yet
        leader = role.leader("ydb")
        if leader is None:
            return None
        try:
            host, port = split_advertised(leader)
        except ValueError:  # (a member's record is written from checked settings)
            return None
        # Each leader is a node of its own to the SDK, which keys connections by node id.
        return host, port, zlib.crc32(leader.encode()) or STANDALONE_NODE_ID

    def elsewhere(self) -> str | None:
        """Why a coordination call is not served here (this member of a cluster does not
        lead, or is stepping down), naming the leader's YDB endpoint when it is known;
        None: it is served here (the leader, or a server that is not part of a cluster)."""
        role = self.member()
        if role is None:
            return None
        if role.leading:
            return "this server is stepping down as the leader" if self._draining() else None
        leader = role.leader("ydb")
        if leader is None:
            return "this server is a standby, and no leader is known here yet"
        return f"this server is a standby; the leader's YDB endpoint is {leader}"

    async def list_endpoints(self, request: Any, context: Any) -> Any:
        """The one endpoint of the database it answers for: this server, or the leader
        of its cluster.

        While no leader is known the answer is UNAVAILABLE, as YDB's when its database
        has no node to offer (its discovery's RESOLVE_ERROR): YDB's SDKs then keep what
        they had and discover again a second or two later (docs/ydb.md, "In a cluster").
        """
        database = self.settings.database
        if request.database and request.database != database:
            why = (
                f"database {request.database!r} is not served here (--ydb-database is {database!r})"
            )
            return pb.discovery.ListEndpointsResponse(
                operation=pb.operation(pb.Status.SCHEME_ERROR, why=[why])
            )
        where = self.endpoint()
        if where is None:
            return pb.discovery.ListEndpointsResponse(
                operation=pb.operation(pb.Status.UNAVAILABLE, why=[NO_LEADER])
            )
        host, port, node_id = where
        endpoint = pb.discovery.EndpointInfo(
            address=host,
            port=port,
            ssl=self.config.tls_cert is not None,  # (every member has the same TLS)
            service=["discovery", "coordination"],
            node_id=node_id,
        )
        result = pb.discovery.ListEndpointsResult(endpoints=[endpoint])
        return pb.discovery.ListEndpointsResponse(operation=pb.operation(pb.Status.SUCCESS, result))

    async def who_am_i(self, request: Any, context: Any) -> Any:
        """The token the call acts as (its name; empty when anonymous)."""
        try:
            token = self.tickets.token_of(context.invocation_metadata(), self._peer(context))
        except UnauthorizedError as error:
            return pb.discovery.WhoAmIResponse(
                operation=pb.operation(pb.Status.UNAUTHORIZED, why=[str(error)])
            )
        result = pb.discovery.WhoAmIResult(user="" if token is None else token.name)
        return pb.discovery.WhoAmIResponse(operation=pb.operation(pb.Status.SUCCESS, result))

    async def login(self, request: Any, context: Any) -> Any:
        """Static credentials: a ticket for the token named ``user`` (password: its secret)."""
        try:
            ticket = self.tickets.login(request.user, request.password, self._peer(context))
        except UnauthorizedError as error:
            return pb.auth.LoginResponse(
                operation=pb.operation(pb.Status.UNAUTHORIZED, why=[str(error)])
            )
        result = pb.auth.LoginResult(token=ticket)
        return pb.auth.LoginResponse(operation=pb.operation(pb.Status.SUCCESS, result))


def advertised(host: str, given: str) -> tuple[str, int]:
    """The host and port discovery gives clients (port 0: the one the face listens on).

    ``given`` (``--ydb-advertise``) is ``HOST`` or ``HOST:PORT`` (``[V6]:PORT``);
    without it, a dialable ``host`` (``--host``), or the machine's name for a wildcard one.
    """
    if not given:
        return (host if host not in _WILDCARDS else socket.gethostname()), 0
    return split_advertised(given)
