"""TLS and mutual TLS against a real ``tenure serve``, with trustme certificates."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from tenure._core import CreateNode, CreateSession, DescribeNode, SessionInfo
from tenure._protocol import (
    NEED_DATA,
    ClientConnection,
    ConnectionClosed,
    Hello,
    Reply,
    Request,
    Welcome,
)
from tenure.server._config.serve_config import ConfigError
from tenure.server._net.tls import describe, server_context

from ..wire import WAIT, Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(60)


@dataclass
class Pki:
    """A CA, the server's files it signed, and a client certificate it issued."""

    ca: trustme.CA
    cert: Path
    key: Path
    ca_file: Path
    client: trustme.LeafCert

    def client_context(self, *, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
        """A client context trusting this CA, presenting ``cert`` if given."""
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        if cert is not None:
            cert.configure_cert(context)
        return context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    base = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = base / "server.pem", base / "server.key", base / "ca.pem"
    for blob in server.cert_chain_pems:
        blob.write_to_path(str(cert), append=True)
    server.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    return Pki(ca, cert, key, ca_file, ca.issue_cert("client@example.com"))


async def rejected(port: int, context: ssl.SSLContext | None) -> None:
    """The server does not let this client in: the TLS handshake fails, or (TLS 1.3
    checks client certificates after the client's side is done) the stream ends
    before any Welcome."""
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=context), WAIT
        )
    except (ssl.SSLError, ConnectionError):
        return
    client = WireClient(reader, writer)
    try:
        event = await client.hello()
        assert isinstance(event, ConnectionClosed), event
    except (ssl.SSLError, ConnectionError):
        pass
    finally:
        await client.close()


async def test_tls_then_the_tenure_handshake(tmp_path: Path, wire: Clients, pki: Pki) -> None:
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    with ServerProcess(tmp_path / "data", *args) as server:
        client = await wire.connect(server.port, tls=pki.client_context())
        assert isinstance(client.welcome, Welcome)
        assert await client.call(CreateNode("n")) is None
        session = await client.call(CreateSession("n", b"k"))
        assert session.seq_no == 1
        assert client.writer.get_extra_info("ssl_object").version() in ("TLSv1.2", "TLSv1.3")
        server.wait_log('"tls": "tls"')


async def test_plain_client_fails_cleanly_and_others_are_served(
    tmp_path: Path, wire: Clients, pki: Pki
) -> None:
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    with ServerProcess(tmp_path / "data", *args) as server:
        good = await wire.connect(server.port, tls=pki.client_context())
        await rejected(server.port, None)  # speaks the tenure protocol in the clear
        # A client that does not trust the server's CA fails too (on its side).
        with pytest.raises(ssl.SSLCertVerificationError):
            await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", server.port, ssl=ssl.create_default_context()),
                WAIT,
            )
        assert await good.call(CreateNode("n")) is None
        other = await wire.connect(server.port, tls=pki.client_context())
        assert (await other.call(DescribeNode("n"))).name == "n"
        assert server.proc.poll() is None


async def test_mutual_tls_requires_a_certificate_of_the_ca(
    tmp_path: Path, wire: Clients, pki: Pki
) -> None:
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key))
    mtls = (*args, "--tls-client-ca", str(pki.ca_file))
    stranger = trustme.CA().issue_cert("client@example.com")
    with ServerProcess(tmp_path / "data", *mtls) as server:
        await rejected(server.port, pki.client_context())  # no certificate
        await rejected(server.port, pki.client_context(cert=stranger))  # another CA's
        client = await wire.connect(server.port, tls=pki.client_context(cert=pki.client))
        assert await client.call(CreateNode("n")) is None
        server.wait_log('"tls": "mtls"')


def test_idle_tls_client_that_never_reads_is_dropped(tmp_path: Path, pki: Pki) -> None:
    """A blocking TLS client that stops reading never answers the server's close_notify:
    the server must not wait for it (asyncio would, for 30 s) to detach its session."""
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--idle-timeout", "0.3")
    with ServerProcess(tmp_path / "data", *args, "--shutdown-grace", "0.3") as server:
        raw = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
        with pki.client_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            codec = ClientConnection()
            tls.sendall(codec.send(Hello(client_name="mute")))
            assert isinstance(read_event(tls, codec), Welcome)
            tls.sendall(codec.send(Request(1, CreateNode("n"))))
            assert isinstance(read_event(tls, codec), Reply)
            tls.sendall(codec.send(Request(2, CreateSession("n", b"k", timeout=60.0))))
            reply = read_event(tls, codec)
            assert isinstance(reply, Reply)
            assert isinstance(reply.value, SessionInfo)
            # Silent from now on, and reading nothing (not even the GoingAway).
            server.wait_log(f'"sessions": [{reply.value.session_id}]')


def read_event(tls: ssl.SSLSocket, codec: ClientConnection) -> object:
    """The next message on a blocking TLS socket (each recv bounded by its timeout)."""
    while (event := codec.next_event()) is NEED_DATA:
        codec.receive_data(tls.recv(65536))
    return event


def test_context_is_tls_1_2_or_later(pki: Pki) -> None:
    context = server_context(pki.cert, pki.key)
    assert context is not None
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    assert describe(context) == "tls"
    assert describe(server_context(pki.cert, pki.key, pki.ca_file)) == "mtls"
    assert describe(server_context(None, None)) == "off"


def test_bad_tls_files_are_named(tmp_path: Path, pki: Pki) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    other_key = tmp_path / "other.key"
    trustme.CA().issue_cert("127.0.0.1").private_key_pem.write_to_path(str(other_key))
    missing = tmp_path / "missing.pem"
    cases: list[tuple[tuple[Path | None, Path | None, Path | None], str]] = [
        ((missing, pki.key, None), f"tls_cert {missing}: cannot read it"),
        ((pki.cert, missing, None), f"tls_key {missing}: cannot read it"),
        ((pki.cert, None, None), "--tls-cert and --tls-key go together"),
        ((None, pki.key, None), "--tls-cert and --tls-key go together"),
        ((None, None, pki.ca_file), "--tls-client-ca needs --tls-cert"),
        ((garbage, pki.key, None), f"tls_cert {garbage} / tls_key {pki.key}: cannot load"),
        ((pki.cert, other_key, None), f"tls_key {other_key}: cannot load"),
        ((pki.cert, pki.key, garbage), f"tls_client_ca {garbage}: not PEM CA certificates"),
        ((pki.cert, pki.key, missing), f"tls_client_ca {missing}: cannot read it"),
    ]
    for (cert, key, ca), message in cases:
        with pytest.raises(ConfigError) as caught:
            server_context(cert, key, ca)
        assert message in str(caught.value)


def test_bad_tls_file_exits_2_naming_it(tmp_path: Path, pki: Pki) -> None:
    missing = tmp_path / "missing.key"
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(missing))
    result = subprocess.run(
        [sys.executable, "-m", "tenure", "serve", *args, "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert f"tls_key {missing}: cannot read it" in result.stderr
    with contextlib.suppress(FileNotFoundError):
        assert not any((tmp_path / "data").iterdir())


#: Another loopback address (Linux routes all of 127/8 to lo): another peer.
OTHER = "127.0.0.2"


async def silent_tcp(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A TCP connection that never sends its ClientHello."""
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), WAIT)


async def closed_by_server(reader: asyncio.StreamReader, within: float) -> bool:
    """Whether the server closes this silent connection within ``within`` seconds."""
    try:
        return await asyncio.wait_for(reader.read(), within) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


async def test_a_tls_handshake_counts_as_handshaking_from_accept(
    tmp_path: Path, wire: Clients, pki: Pki
) -> None:
    # Two peers that open TCP and never send a ClientHello take both places of
    # --max-handshaking 2: a real client waits (not accepted) until the TLS
    # handshake timeout closes them, then gets in. (The old server counted a
    # connection only once its TLS handshake was done: these two cost nothing.)
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--fsync", "off")
    limits = ("--max-handshaking", "2", "--handshake-timeout", "2")
    with ServerProcess(tmp_path / "data", *args, *limits) as server:
        stalled = [await silent_tcp(server.port) for _ in range(2)]
        server.wait_log("too many connections in their handshake; accepting paused")
        start = asyncio.get_running_loop().time()
        client = await wire.connect(server.port, tls=pki.client_context())
        waited = asyncio.get_running_loop().time() - start
        assert waited > 1.0, waited  # (accepted once the stalled ones were closed)
        for reader, writer in stalled:  # by the TLS handshake timeout
            assert await closed_by_server(reader, 0.5)
            writer.close()
        await client.call(CreateNode("after-the-stalled"))


async def test_a_tls_handshake_counts_against_the_per_address_cap(tmp_path: Path, pki: Pki) -> None:
    args = ("--tls-cert", str(pki.cert), "--tls-key", str(pki.key), "--fsync", "off")
    with ServerProcess(tmp_path / "data", *args, "--max-connections-per-address", "1") as server:
        stalled_reader, stalled = await silent_tcp(server.port)
        await asyncio.sleep(0.2)  # (accepted: in its TLS handshake)
        reader, another = await silent_tcp(server.port)
        assert await closed_by_server(reader, WAIT)  # at once: the stalled one counts
        another.close()
        server.wait_log("too many connections from one address; refusing")
        assert not await closed_by_server(stalled_reader, 0.3)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1", server.port, ssl=pki.client_context(), local_addr=(OTHER, 0)
            ),
            WAIT,
        )
        client = WireClient(reader, writer)
        assert isinstance(await client.hello(), Welcome)
        await client.close()
        stalled.close()
