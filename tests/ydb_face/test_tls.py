"""TLS on the YDB port: the native listener's ``--tls-cert``/``--tls-key`` (trustme
certificates), YDB's SDK over ``grpcs://`` with the CA, and plain clients refused."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import trustme
import ydb
from ydb.coordination import CoordinationClient

from tenure.compat.ydb import _protos as pb
from tests.server.net.test_reload import reloads
from tests.server.wire import WAIT
from tests.ydb_face.conftest import DATABASE, YdbServer, start_server, unique
from tests.ydb_face.raw import Status, unary

pytestmark = pytest.mark.timeout(60)

LIST_ENDPOINTS = "/Ydb.Discovery.V1.DiscoveryService/ListEndpoints"


@dataclass
class Secured:
    """A server with TLS, and the CA that signed its certificate (PEM)."""

    server: YdbServer
    ca: bytes
    authority: trustme.CA

    @property
    def credentials(self) -> grpc.ChannelCredentials:
        """gRPC channel credentials that trust the server's CA."""
        return grpc.ssl_channel_credentials(root_certificates=self.ca)


def tls_server(base: Path, *, mutual: bool) -> Secured:
    """A server with a certificate of a new CA (and asking for clients' ones if
    ``mutual``); the caller kills it."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = base / "server.pem", base / "server.key", base / "ca.pem"
    for blob in issued.cert_chain_pems:
        blob.write_to_path(str(cert), append=True)
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    flags = ["--tls-cert", str(cert), "--tls-key", str(key)]
    if mutual:
        flags += ["--tls-client-ca", str(ca_file)]
    return Secured(start_server(base / "data", *flags), ca.cert_pem.bytes(), ca)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    running = tls_server(tmp_path_factory.mktemp("ydb-tls"), mutual=False)
    try:
        yield running
    finally:
        running.server.process.kill()


def test_the_sdk_over_grpcs_with_the_ca_works_end_to_end(secured: Secured) -> None:
    config = ydb.DriverConfig(
        endpoint=f"grpcs://127.0.0.1:{secured.server.ydb_port}",
        database=DATABASE,
        root_certificates=secured.ca,
    )
    driver = ydb.Driver(driver_config=config)
    try:
        driver.wait(timeout=WAIT, fail_fast=True)
        client = CoordinationClient(driver)
        path = f"{DATABASE}/{unique()}"
        client.create_node(path)
        with client.session(path) as session, session.semaphore("job", 2) as semaphore:
            semaphore.update(b"over tls")
            described = semaphore.describe()
            assert (described.count, described.data) == (1, b"over tls")
        client.delete_node(path)
    finally:
        driver.stop()


async def test_discovery_answers_ssl_true(secured: Secured) -> None:
    request = pb.discovery.ListEndpointsRequest(database=DATABASE)
    reply = await unary(
        secured.server.ydb_port,
        LIST_ENDPOINTS,
        request,
        pb.discovery.ListEndpointsResponse,
        credentials=secured.credentials,
    )
    assert reply.operation.status == Status.SUCCESS
    result = pb.discovery.ListEndpointsResult()
    reply.operation.result.Unpack(result)
    (endpoint,) = result.endpoints
    assert endpoint.ssl
    assert (endpoint.address, endpoint.port) == ("127.0.0.1", secured.server.ydb_port)


async def test_a_plain_client_cannot_call(secured: Secured) -> None:
    request = pb.discovery.ListEndpointsRequest(database=DATABASE)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await unary(
            secured.server.ydb_port, LIST_ENDPOINTS, request, pb.discovery.ListEndpointsResponse
        )
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_a_client_that_does_not_trust_the_ca_cannot_call(secured: Secured) -> None:
    stranger = grpc.ssl_channel_credentials(root_certificates=trustme.CA().cert_pem.bytes())
    request = pb.discovery.ListEndpointsRequest(database=DATABASE)
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await unary(
            secured.server.ydb_port,
            LIST_ENDPOINTS,
            request,
            pb.discovery.ListEndpointsResponse,
            credentials=stranger,
        )
    assert raised.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_mutual_tls_needs_a_client_certificate_of_the_ca(tmp_path: Path) -> None:
    mutual = tls_server(tmp_path, mutual=True)
    try:
        request = pb.discovery.ListEndpointsRequest(database=DATABASE)
        port, reply = mutual.server.ydb_port, pb.discovery.ListEndpointsResponse
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await unary(port, LIST_ENDPOINTS, request, reply, credentials=mutual.credentials)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        client = mutual.authority.issue_cert("client@example.com")
        with_cert = grpc.ssl_channel_credentials(
            root_certificates=mutual.ca,
            private_key=client.private_key_pem.bytes(),
            certificate_chain=b"".join(blob.bytes() for blob in client.cert_chain_pems),
        )
        answered = await unary(port, LIST_ENDPOINTS, request, reply, credentials=with_cert)
        assert answered.operation.status == Status.SUCCESS
    finally:
        mutual.server.process.kill()


async def test_a_reload_rotates_the_ydb_ports_certificate_keeping_open_channels(
    tmp_path: Path,
) -> None:
    """SIGHUP reads the TLS files again for the YDB port too (issue 50): a new handshake
    gets the new certificate (one of another CA here, so a client that trusts only the
    old one is refused); a channel connected before is served still."""
    old = tls_server(tmp_path, mutual=False)
    try:
        port, request = old.server.ydb_port, pb.discovery.ListEndpointsRequest(database=DATABASE)
        reply = pb.discovery.ListEndpointsResponse
        address = f"127.0.0.1:{port}"
        # A channel of its own (no subchannel shared with the calls below), kept open.
        options = [("grpc.use_local_subchannel_pool", 1)]
        async with grpc.aio.secure_channel(address, old.credentials, options) as before:
            call = before.unary_unary(
                LIST_ENDPOINTS,
                request_serializer=type(request).SerializeToString,
                response_deserializer=reply.FromString,
            )
            assert (await call(request, timeout=WAIT)).operation.status == Status.SUCCESS
            new_ca = trustme.CA()
            issued = new_ca.issue_cert("127.0.0.1", "localhost")
            cert = tmp_path / "server.pem"
            cert.write_bytes(b"".join(blob.bytes() for blob in issued.cert_chain_pems))
            (tmp_path / "server.key").write_bytes(issued.private_key_pem.bytes())
            reloads(old.server.process)
            trusting_new = grpc.ssl_channel_credentials(root_certificates=new_ca.cert_pem.bytes())
            answered = await unary(port, LIST_ENDPOINTS, request, reply, credentials=trusting_new)
            assert answered.operation.status == Status.SUCCESS
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await unary(port, LIST_ENDPOINTS, request, reply, credentials=old.credentials)
            assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
            # The channel connected before keeps its connection and its TLS session.
            assert (await call(request, timeout=WAIT)).operation.status == Status.SUCCESS
        assert '"ydb_tls"' in old.server.process.output()
    finally:
        old.server.process.kill()
