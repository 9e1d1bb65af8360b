"""YDB's calls that are not coordination: discovery and logins.

* ``Ydb.Discovery.V1.DiscoveryService/ListEndpoints``: this server as the one
  endpoint of the database it answers for (YDB's SDKs discover the endpoints of a
  database first, then connect to them); ``WhoAmI``: the token a call acts as.
* ``Ydb.Auth.V1.AuthService/Login``: static credentials (:mod:`.tickets`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any, Final

from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.paths import split_advertised
from tenure.compat.ydb.tickets import Tickets, UnauthorizedError
from tenure.server.plug import ServeConfig

#: The addresses that mean "every interface" (not one a client can dial).
_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::", "[::]"})


class Directory:
    """Discovery and logins for the YDB face; ``port()`` is the port it listens on."""

    def __init__(self, config: ServeConfig, tickets: Tickets, port: Callable[[], int]) -> None:
        self.config = config
        self.tickets = tickets
        self._port = port

    async def list_endpoints(self, request: Any, context: Any) -> Any:
        """This server, as the one endpoint of the database it answers for."""
        database = self.config.ydb_database
        if request.database and request.database != database:
            why = (
                f"database {request.database!r} is not served here (--ydb-database is {database!r})"
            )
            return pb.discovery.ListEndpointsResponse(
                operation=pb.operation(pb.Status.SCHEME_ERROR, why=[why])
            )
        host, port = advertised(self.config)
        endpoint = pb.discovery.EndpointInfo(
            address=host,
            port=port or self._port(),
            ssl=self.config.tls_cert is not None,
            service=["discovery", "coordination"],
            node_id=1,
        )
        result = pb.discovery.ListEndpointsResult(endpoints=[endpoint])
        return pb.discovery.ListEndpointsResponse(operation=pb.operation(pb.Status.SUCCESS, result))

    async def who_am_i(self, request: Any, context: Any) -> Any:
        """The token the call acts as (its name; empty when anonymous)."""
        try:
            token = self.tickets.token_of(context.invocation_metadata())
        except UnauthorizedError as error:
            return pb.discovery.WhoAmIResponse(
                operation=pb.operation(pb.Status.UNAUTHORIZED, why=[str(error)])
            )
        result = pb.discovery.WhoAmIResult(user="" if token is None else token.name)
        return pb.discovery.WhoAmIResponse(operation=pb.operation(pb.Status.SUCCESS, result))

    async def login(self, request: Any, context: Any) -> Any:
        """Static credentials: a ticket for the token named ``user`` (password: its secret)."""
        try:
            ticket = self.tickets.login(request.user, request.password)
        except UnauthorizedError as error:
            return pb.auth.LoginResponse(
                operation=pb.operation(pb.Status.UNAUTHORIZED, why=[str(error)])
            )
        result = pb.auth.LoginResult(token=ticket)
        return pb.auth.LoginResponse(operation=pb.operation(pb.Status.SUCCESS, result))


def advertised(config: ServeConfig) -> tuple[str, int]:
    """The host and port discovery gives clients (port 0: the one the face listens on).

    ``--ydb-advertise`` is ``HOST`` or ``HOST:PORT`` (``[V6]:PORT``); without it, a
    dialable ``--host``, or the machine's name for a wildcard one.
    """
    given = config.ydb_advertise
    if not given:
        return (config.host if config.host not in _WILDCARDS else socket.gethostname()), 0
    return split_advertised(given)
