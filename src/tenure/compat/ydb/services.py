"""The YDB face's gRPC services: which method is which call, and what each call goes through.

:class:`Services` makes the ``grpc`` handlers the face's server runs:

* ``Ydb.Coordination.V1.CoordinationService``: ``Session`` (:mod:`.session_calls`) and
  the node calls (:mod:`.nodes`);
* ``Ydb.RateLimiter.V1.RateLimiterService``: :mod:`.rate_limiter`'s;
* ``Ydb.Discovery.V1.DiscoveryService``: ``ListEndpoints`` and ``WhoAmI``, and
  ``Ydb.Auth.V1.AuthService``: ``Login`` (:mod:`.directory`).

A unary call's request that cannot be decoded ends the call INVALID_ARGUMENT, naming
the message it should have been; each answer's YDB status is counted
(:class:`~tenure.compat.ydb.metrics.YdbCounts`); and a coordination call (the node
calls, the rate limiter's, the Session stream's start) is served only where the
cluster is led, else ended gRPC ``UNAVAILABLE`` before anything of it is read or done
(:func:`lead_or_leave`: the face's module docstring says why). Any other method is
UNIMPLEMENTED (gRPC's own answer).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.directory import Directory
from tenure.compat.ydb.metrics import YdbCounts
from tenure.compat.ydb.nodes import NodeCalls
from tenure.compat.ydb.rate_limiter import RateLimiterCalls
from tenure.server.plug import HostCalls

#: A gRPC handler of one call: (request, context) to its answer.
Call = Callable[[Any, Any], Any]


def _identity(data: bytes) -> bytes:
    """The Session stream's answers are encoded already (by the outbox's writer)."""
    return data


class Services:
    """The gRPC handlers of one YDB face (see the module docstring).

    ``session(requests, context)`` serves one Session stream; ``peer(context)`` is the
    client of a call; ``counts`` is told each answer's status (None: not measured).
    """

    def __init__(
        self,
        host: HostCalls,
        directory: Directory,
        nodes: NodeCalls,
        rate_limiter: RateLimiterCalls,
        session: Call,
        peer: Callable[[Any], str],
        counts: YdbCounts | None,
    ) -> None:
        self.host = host
        self.directory = directory
        self.nodes = nodes
        self.rate_limiter = rate_limiter
        self._session = session
        self._peer = peer
        self.counts = counts

    def handlers(self) -> tuple[grpc.GenericRpcHandler, ...]:
        """The handlers of every service the face answers."""

        def unary(name: str, call: Call, request: Any, reply: Any) -> Any:
            return grpc.unary_unary_rpc_method_handler(
                _decoded(self._counted(name, call), request),
                request_deserializer=functools.partial(_decode_or_none, request),
                response_serializer=reply.SerializeToString,
            )

        coordination, discovery, auth = pb.coordination, pb.discovery, pb.auth
        nodes = self.nodes
        return (
            grpc.method_handlers_generic_handler(
                "Ydb.Coordination.V1.CoordinationService",
                {
                    "Session": grpc.stream_stream_rpc_method_handler(
                        self._session,
                        request_deserializer=coordination.SessionRequest.FromString,
                        response_serializer=_identity,
                    ),
                    "CreateNode": unary(
                        "create_node",
                        self._led("create_node", _node_call(self._peer, nodes.create)),
                        coordination.CreateNodeRequest,
                        coordination.CreateNodeResponse,
                    ),
                    "AlterNode": unary(
                        "alter_node",
                        self._led("alter_node", _node_call(self._peer, nodes.alter)),
                        coordination.AlterNodeRequest,
                        coordination.AlterNodeResponse,
                    ),
                    "DropNode": unary(
                        "drop_node",
                        self._led("drop_node", _node_call(self._peer, nodes.drop)),
                        coordination.DropNodeRequest,
                        coordination.DropNodeResponse,
                    ),
                    "DescribeNode": unary(
                        "describe_node",
                        self._led("describe_node", _node_call(self._peer, nodes.describe)),
                        coordination.DescribeNodeRequest,
                        coordination.DescribeNodeResponse,
                    ),
                },
            ),
            self.rate_limiter.handler(
                lambda name, call, request, reply: unary(
                    name, self._led(name, call), request, reply
                )
            ),
            grpc.method_handlers_generic_handler(
                "Ydb.Discovery.V1.DiscoveryService",
                {
                    "ListEndpoints": unary(
                        "list_endpoints",
                        self.directory.list_endpoints,
                        discovery.ListEndpointsRequest,
                        discovery.ListEndpointsResponse,
                    ),
                    "WhoAmI": unary(
                        "who_am_i",
                        self.directory.who_am_i,
                        discovery.WhoAmIRequest,
                        discovery.WhoAmIResponse,
                    ),
                },
            ),
            grpc.method_handlers_generic_handler(
                "Ydb.Auth.V1.AuthService",
                {
                    "Login": unary(
                        "login", self.directory.login, auth.LoginRequest, auth.LoginResponse
                    )
                },
            ),
        )

    def _counted(self, name: str, call: Call) -> Call:
        """A unary call that counts its answer's status (as is, without counts)."""
        counts = self.counts
        if counts is None:
            return call

        async def counted(request: Any, context: Any) -> Any:
            response = await call(request, context)
            status = response.operation.status
            counts.request(name, pb.Status.StatusCode.Name(status).lower())
            return response

        return counted

    def _led(self, name: str, call: Call) -> Call:
        """A coordination call, served only where the cluster is led (module docstring)."""

        async def handler(request: Any, context: Any) -> Any:
            await lead_or_leave(self.directory, self.counts, name, context)
            await self.host.caught_up()  # (a mass expiry's slices first: --step-budget)
            return await call(request, context)

        return handler


async def lead_or_leave(
    directory: Directory, counts: YdbCounts | None, name: str, context: Any
) -> None:
    """End call ``name`` with gRPC UNAVAILABLE unless it is served here (the leader, or
    a server that is not part of a cluster): a gRPC status, not a YDB one, as only that
    makes YDB's SDKs drop the endpoint and discover again (docs/ydb.md).

    Raises:
        grpc.aio.AbortError: the call was ended (gRPC's way out of a handler).
    """
    why = directory.elsewhere()
    if why is not None:
        if counts is not None:
            counts.request(name, "unavailable")
        await context.abort(grpc.StatusCode.UNAVAILABLE, why)


def _node_call(peer: Callable[[Any], str], call: Call) -> Call:
    """A node call as a gRPC handler: the request, the call's metadata and its client."""

    async def handler(request: Any, context: Any) -> Any:
        return await call(request, (context.invocation_metadata(), peer(context)))

    return handler


def _decode_or_none(message: Any, data: bytes) -> Any:
    """``data`` as a ``message``; None if it is not one (see :func:`_decoded`)."""
    try:
        return message.FromString(data)
    except DecodeError:
        return None


def _decoded(call: Call, request: Any) -> Call:
    """``call``, ending INVALID_ARGUMENT for a request that was not a ``request``.

    (A deserializer that raises ends the call UNKNOWN, naming Python's exception.)
    """
    why = f"the request is not a {request.DESCRIPTOR.full_name}"

    async def handler(message: Any, context: Any) -> Any:
        if message is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, why)
        return await call(message, context)

    return handler
