"""``tenure://`` and ``tenures://`` with TLS, mutual TLS and auth tokens, as users write them."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

import tenure
import tenure.sync
from tenure.errors import (
    AuthenticationError,
    PermissionDeniedError,
    SessionExpiredError,
    UnavailableError,
)
from tests.api.support import eventually, owners, within
from tests.netproxy import NetProxy
from tests.server.wire import ServerProcess

pytestmark = pytest.mark.timeout(60)

WRITER, READER = "writer-secret-1", "reader-secret-2"
AUTH_FILE = f"""
[[token]]
name = "writer"
secret = "{WRITER}"
access = "read-write"

[[token]]
name = "reader"
secret = "{READER}"
access = "read-only"
"""


@dataclass
class Files:
    """A CA and the PEM files the server and a client present."""

    ca: trustme.CA
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def write_leaf(leaf: trustme.LeafCert, cert: Path, key: Path) -> None:
    for blob in leaf.cert_chain_pems:
        blob.write_to_path(str(cert), append=True)
    leaf.private_key_pem.write_to_path(str(key))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    base = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    ca_file = base / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server = (base / "server.pem", base / "server.key")
    client = (base / "client.pem", base / "client.key")
    write_leaf(ca.issue_cert("127.0.0.1", "localhost"), *server)
    write_leaf(ca.issue_cert("worker@example.com"), *client)
    return Files(ca, ca_file, *server, *client)


@pytest.fixture
def tls_server(tmp_path: Path, files: Files) -> Iterator[ServerProcess]:
    tls = ("--tls-cert", str(files.server_cert), "--tls-key", str(files.server_key))
    with ServerProcess(tmp_path / "data", "--fsync", "off", *tls) as server:
        yield server


@pytest.fixture
def mtls_server(tmp_path: Path, files: Files) -> Iterator[ServerProcess]:
    tls = ("--tls-cert", str(files.server_cert), "--tls-key", str(files.server_key))
    mutual = ("--tls-client-ca", str(files.ca_file))
    with ServerProcess(tmp_path / "data", "--fsync", "off", *tls, *mutual) as server:
        yield server


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[ServerProcess]:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    with ServerProcess(tmp_path / "data", "--fsync", "off", "--auth-file", str(auth)) as server:
        yield server


async def lock_once(client: tenure.Client) -> int:
    await client.create_node("n", exist_ok=True)
    async with client.session("n") as session, session.mutex("job") as lock:
        return lock.token


async def test_tenures_with_a_ca_file(tls_server: ServerProcess, files: Files) -> None:
    url = f"tenures://127.0.0.1:{tls_server.port}?ca={files.ca_file}"
    async with tenure.connect(url) as client:
        assert await lock_once(client) > 0


async def test_an_ssl_context_and_a_server_hostname(
    tls_server: ServerProcess, files: Files
) -> None:
    context = ssl.create_default_context()
    files.ca.configure_trust(context)
    url = f"tenure://127.0.0.1:{tls_server.port}"
    async with tenure.connect(url, ssl=context, server_hostname="localhost") as client:
        assert await lock_once(client) > 0


async def test_tls_refuses_an_untrusted_server_and_a_plain_client(
    tls_server: ServerProcess,
) -> None:
    # Without ca=, tenures:// trusts only the system's CAs, which did not sign this one.
    with pytest.raises(UnavailableError, match="CERTIFICATE_VERIFY_FAILED"):
        await tenure.connect(f"tenures://127.0.0.1:{tls_server.port}")
    with pytest.raises(UnavailableError):
        await tenure.connect(f"tenure://127.0.0.1:{tls_server.port}", connect_timeout=2)


async def test_mutual_tls_needs_the_client_certificate(
    mtls_server: ServerProcess, files: Files
) -> None:
    base = f"tenures://127.0.0.1:{mtls_server.port}?ca={files.ca_file}"
    async with tenure.connect(f"{base}&cert={files.client_cert}&key={files.client_key}") as c:
        assert await lock_once(c) > 0
    with pytest.raises(UnavailableError):  # no certificate: the server hangs up
        await tenure.connect(base, connect_timeout=2)


async def test_tokens_authenticate_and_authorize(auth_server: ServerProcess) -> None:
    url = f"tenure://127.0.0.1:{auth_server.port}"
    with pytest.raises(AuthenticationError):
        await tenure.connect(url)
    with pytest.raises(AuthenticationError):
        await tenure.connect(f"{url}?token=wrong")

    async with (
        tenure.connect(f"{url}?token={WRITER}") as writer,
        tenure.connect(url, token=READER) as reader,
    ):
        await writer.create_node("n")
        writing = await writer.session("n")
        await writing.semaphore("cfg").create(limit=1, data=b"v1")
        session = await reader.session("n")  # reading needs a session too
        assert (await session.semaphore("cfg").describe()).data == b"v1"
        with pytest.raises(PermissionDeniedError, match="read-only"):
            await session.mutex("job").lock()
        with pytest.raises(PermissionDeniedError, match="read-only"):
            await session.semaphore("cfg").update(b"v2")
        with pytest.raises(PermissionDeniedError):
            await reader.create_node("other")
        assert (await writing.semaphore("cfg").describe()).data == b"v1"
        assert "token=***" in repr(writer)
        # Listing needs read access; ending another's session, write access.
        assert await reader.list_nodes() == ["n"]
        assert {s.session_id for s in await reader.list_sessions("n")} == {writing.id, session.id}
        with pytest.raises(PermissionDeniedError, match="KillSession"):
            await reader.kill_session("n", writing.id)
        await writer.kill_session("n", session.id)
        assert isinstance(await within(session.lost), SessionExpiredError)


async def test_a_tls_and_token_client_reconnects_and_reattaches(
    tmp_path: Path, files: Files
) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    tls = ("--tls-cert", str(files.server_cert), "--tls-key", str(files.server_key))
    with ServerProcess(tmp_path / "data", "--fsync", "off", *tls, "--auth-file", str(auth)) as srv:
        async with NetProxy("127.0.0.1", srv.port) as proxy:
            url = f"tenures://127.0.0.1:{proxy.port}?ca={files.ca_file}&token={WRITER}"
            async with tenure.connect(url) as client:
                await client.create_node("n")
                session = await client.session("n", recovery_window=10.0)
                lock = await session.mutex("job").lock()
                proxy.drop()
                link = client.backend.shards[0].link  # type: ignore[attr-defined]

                async def again() -> bool:
                    return bool(link.epoch >= 2 and link.connected)

                await eventually(again, "a new TLS connection")
                assert lock.held
                assert await within(owners(session, "job")) == [session.id]


def test_a_sync_clients_repr_shows_no_secret(auth_server: ServerProcess) -> None:
    """Issue 47: the sync client's repr (the client Celery's beat holds, in its log
    lines) showed the URL's token in clear, where the async client's masked it: both
    show the URL as tenure.backends.masked_url says."""
    url = f"tenure://127.0.0.1:{auth_server.port}?token={WRITER}"
    with tenure.sync.connect(url) as client:
        assert WRITER not in repr(client)
        assert f"127.0.0.1:{auth_server.port}?token=***" in repr(client)
