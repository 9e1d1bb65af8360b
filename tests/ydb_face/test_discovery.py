"""Discovery: where the YDB face sends clients (``--ydb-advertise``), and what it says of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.paths import split_advertised
from tests.ydb_face.conftest import DATABASE, YdbServer
from tests.ydb_face.raw import unary

LIST_ENDPOINTS = "/Ydb.Discovery.V1.DiscoveryService/ListEndpoints"


@pytest.mark.parametrize(
    ("given", "split"),
    [
        ("db.example", ("db.example", 0)),
        ("db.example:2136", ("db.example", 2136)),
        ("10.0.0.5:1", ("10.0.0.5", 1)),
        ("[::1]:2136", ("::1", 2136)),
        ("[::1]", ("::1", 0)),
        ("::1", ("::1", 0)),  # a bare IPv6 address: no port
    ],
)
def test_an_advertised_address_is_a_host_and_maybe_a_port(
    given: str, split: tuple[str, int]
) -> None:
    assert split_advertised(given) == split


async def endpoint(server: YdbServer) -> Any:
    request = pb.discovery.ListEndpointsRequest(database=DATABASE)
    reply = await unary(server, LIST_ENDPOINTS, request, pb.discovery.ListEndpointsResponse)
    assert reply.operation.status == pb.Status.SUCCESS
    result = pb.discovery.ListEndpointsResult()
    reply.operation.result.Unpack(result)
    (found,) = result.endpoints
    return found


async def test_discovery_gives_host_and_port_as_advertised(
    serve: Callable[..., YdbServer],
) -> None:
    plain = serve()
    found = await endpoint(plain)
    assert (found.address, found.port, found.ssl) == ("127.0.0.1", plain.ydb_port, False)
    behind = serve(
        "--ydb-advertise", "proxy.example:40000", data_dir=plain.process.data_dir.parent / "b"
    )
    found = await endpoint(behind)
    assert (found.address, found.port) == ("proxy.example", 40000)
    named = serve("--ydb-advertise", "[::1]", data_dir=plain.process.data_dir.parent / "c")
    found = await endpoint(named)
    assert (found.address, found.port) == ("::1", named.ydb_port)
