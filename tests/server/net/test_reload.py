"""Reload (issue 50) against a real ``tenure serve``: SIGHUP and ``tenure reload``.

TLS: a certificate rotated under a connection made before (it keeps working, its
session too) while a new handshake gets the new certificate; client CAs rotated
(mutual TLS); files that do not load change nothing. The auth file: tokens added,
removed, rotated and changed, quotas changed, through ``tenure reload`` (the HTTP
endpoint, an admin token); a removed or rotated token's connections are closed, their
sessions kept for their recovery window.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trustme

from tenure._core import (
    AttachSession,
    CreateNode,
    CreateSession,
    DescribeNode,
    NodeDescription,
    SessionInfo,
)
from tenure._protocol import GoingAway, Pong, Refused, Reply
from tenure._protocol.admin import FilesReloaded, ReloadFiles
from tenure.errors import ErrorCode

from ..tenants import TenantServer, auth_text, token, write_auth_file
from ..wire import WAIT, Clients, ServerProcess, WireClient, free_port
from .test_tls import rejected

pytestmark = pytest.mark.timeout(90)


def issue(ca: trustme.CA, cert: Path, key: Path) -> bytes:
    """Write a new server certificate of ``ca`` (127.0.0.1) to ``cert`` and ``key``;
    its DER (what a client sees)."""
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert.write_bytes(b"".join(blob.bytes() for blob in leaf.cert_chain_pems))
    key.write_bytes(leaf.private_key_pem.bytes())
    return ssl.PEM_cert_to_DER_cert(leaf.cert_chain_pems[0].bytes().decode())


def trusting(*cas: trustme.CA, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    for ca in cas:
        ca.configure_trust(context)
    if cert is not None:
        cert.configure_cert(context)
    return context


def peer_der(client: WireClient) -> bytes:
    der = client.writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    assert isinstance(der, bytes)
    return der


def reloads(server: ServerProcess, event: str = "reloaded") -> None:
    """SIGHUP ``server`` and wait (bounded) until it logs ``event`` once more."""
    text = f'"event": "{event}"'
    seen = server.output().count(text)
    server.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + WAIT
    while server.output().count(text) <= seen:
        assert server.proc.poll() is None, server.output()
        assert time.monotonic() < deadline, f"{text} not logged again: {server.output()}"
        time.sleep(0.02)


async def test_a_rotated_certificate_serves_new_handshakes_and_keeps_old_ones(
    tmp_path: Path, wire: Clients
) -> None:
    ca = trustme.CA()
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    first = issue(ca, cert, key)
    with ServerProcess(tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key)) as server:
        before = await wire.connect(server.port, tls=trusting(ca))
        assert peer_der(before) == first
        assert await before.call(CreateNode("n")) is None
        session = await before.call(CreateSession("n", b"k", timeout=30.0))
        second = issue(ca, cert, key)
        assert second != first
        reloads(server)
        after = await wire.connect(server.port, tls=trusting(ca))
        assert peer_der(after) == second  # the new handshake: the new certificate
        # The connection made before is served still, on its own TLS session.
        assert (await before.call(DescribeNode("n"))).name == "n"
        assert peer_der(before) == first
        again = await before.call(CreateSession("n", b"k2"))
        assert again.session_id != session.session_id
        assert '"tls": "tls"' in server.output()


async def test_rotated_client_cas_judge_new_handshakes_only(tmp_path: Path, wire: Clients) -> None:
    server_ca, old_ca, new_ca = trustme.CA(), trustme.CA(), trustme.CA()
    cert, key, cas = tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem"
    issue(server_ca, cert, key)
    old_ca.cert_pem.write_to_path(str(cas))
    old_client, new_client = old_ca.issue_cert("old@x"), new_ca.issue_cert("new@x")
    args = ("--tls-cert", str(cert), "--tls-key", str(key), "--tls-client-ca", str(cas))
    with ServerProcess(tmp_path / "data", *args) as server:
        before = await wire.connect(server.port, tls=trusting(server_ca, cert=old_client))
        assert await before.call(CreateNode("n")) is None
        await rejected(server.port, trusting(server_ca, cert=new_client))
        new_ca.cert_pem.write_to_path(str(cas))
        reloads(server)
        await rejected(server.port, trusting(server_ca, cert=old_client))
        fresh = await wire.connect(server.port, tls=trusting(server_ca, cert=new_client))
        assert (await fresh.call(DescribeNode("n"))).name == "n"
        assert (await before.call(DescribeNode("n"))).name == "n"  # not dropped
        assert '"tls": "mtls"' in server.output()


async def test_tls_files_that_do_not_load_change_nothing(tmp_path: Path, wire: Clients) -> None:
    ca = trustme.CA()
    cert, key = tmp_path / "server.pem", tmp_path / "server.key"
    first = issue(ca, cert, key)
    with ServerProcess(tmp_path / "data", "--tls-cert", str(cert), "--tls-key", str(key)) as server:
        before = await wire.connect(server.port, tls=trusting(ca))
        good_key = key.read_bytes()
        issue(trustme.CA(), tmp_path / "other.pem", key)  # a key that is not the cert's
        reloads(server, "reload_refused")
        assert f"tls_key {key}: cannot load" in server.output()
        key.write_bytes(good_key)
        cert.write_text("not a certificate\n")
        reloads(server, "reload_refused")
        assert f"tls_cert {cert}" in server.output()
        after = await wire.connect(server.port, tls=trusting(ca))
        assert peer_der(after) == first  # still the certificate it had
        assert await before.call(CreateNode("n")) is None
        assert server.proc.poll() is None


async def healthz(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """One ``GET /healthz`` on a kept-alive HTTP connection: its status line."""
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    status = await asyncio.wait_for(reader.readline(), WAIT)
    while (await asyncio.wait_for(reader.readline(), WAIT)) not in (b"\r\n", b""):
        pass
    await asyncio.wait_for(reader.readexactly(3), WAIT)  # "ok\n"
    return status


async def test_the_http_ports_certificate_is_rotated_too(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert, key = tmp_path / "http.pem", tmp_path / "http.key"
    first = issue(ca, cert, key)
    http = free_port()
    args = ("--http-port", str(http), "--http-tls-cert", str(cert), "--http-tls-key", str(key))
    with ServerProcess(tmp_path / "data", *args) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", http, ssl=trusting(ca))
        try:
            assert writer.get_extra_info("ssl_object").getpeercert(binary_form=True) == first
            assert b" 200 " in await healthz(reader, writer)
            second = issue(ca, cert, key)
            reloads(server)
            assert '"others": ["http_tls"]' in server.output()
            assert b" 200 " in await healthz(reader, writer)  # kept alive through it
            fresh = await asyncio.open_connection("127.0.0.1", http, ssl=trusting(ca))
            assert fresh[1].get_extra_info("ssl_object").getpeercert(binary_form=True) == second
            fresh[1].close()
        finally:
            writer.close()


ADMIN, ALICE, BOB, BOB2, CAROL, DAVE = (
    "admin-secret",
    "alice-secret",
    "bob-secret",
    "bob-rotated",
    "carol-secret",
    "dave-secret",
)


def tenure_reload(
    http_port: int, secret: str | None, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``tenure reload --url http://...`` as an operator runs it (the token in the env)."""
    env = {k: v for k, v in os.environ.items() if k != "TENURE_AUTH_TOKEN"}
    if secret is not None:
        env["TENURE_AUTH_TOKEN"] = secret
    url = f"http://127.0.0.1:{http_port}"
    return subprocess.run(
        [sys.executable, "-m", "tenure", "reload", "--url", url, *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
        stdin=subprocess.DEVNULL,
    )


async def closed_for(client: WireClient, name: str) -> None:
    """``client`` is told its token is gone (GoingAway AUTHENTICATION), then closed."""
    events = await client.until_closed()
    away = [event for event in events if isinstance(event, GoingAway)]
    assert away, events
    assert away[0].code is ErrorCode.AUTHENTICATION
    assert f"token {name!r}" in away[0].reason


async def test_tenure_reload_takes_tokens_added_removed_rotated_and_quotas(
    tmp_path: Path, wire: Clients
) -> None:
    first = auth_text(
        token("admin", ADMIN),
        token("alice", ALICE),
        token("bob", BOB),
        token("carol", CAROL, nodes=["n"]),
    )
    auth = write_auth_file(tmp_path, first)
    with TenantServer(tmp_path, auth, http=True) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        assert await admin.call(CreateNode("n")) is None
        alice = await wire.connect(server.port, token=ALICE)
        bob = await wire.connect(server.port, token=BOB)
        carol = await wire.connect(server.port, token=CAROL)
        bobs = await bob.call(CreateSession("n", b"bob-key", timeout=60.0))
        await alice.call(CreateSession("n", b"alice-key", timeout=60.0))
        await carol.call(CreateSession("n", b"carol-1"))
        # Not an admin token (limited to a node): refused, nothing reloaded.
        denied = tenure_reload(server.http_port, CAROL)
        assert denied.returncode == 3, denied
        assert "may not reload" in denied.stderr
        assert tenure_reload(server.http_port, "wrong").returncode == 3
        auth.write_text(
            auth_text(
                token("admin", ADMIN),
                token("bob", BOB2),
                token("carol", CAROL, nodes=["n"], quota={"sessions": 1}),
                token("dave", DAVE),
            )
        )
        done = tenure_reload(server.http_port, ADMIN, "--json")
        assert done.returncode == 0, done
        answer = json.loads(done.stdout)
        assert answer["tokens_added"] == ["dave"]
        assert answer["tokens_removed"] == ["alice"]
        assert answer["tokens_rotated"] == ["bob"]
        assert answer["tokens_changed"] == ["carol"]
        assert answer["connections_closed"] == 2
        assert ADMIN not in done.stdout + done.stderr + server.output()
        await closed_for(alice, "alice")
        await closed_for(bob, "bob")
        # The others stay; carol's new quota holds from now on (she has one session).
        assert (await admin.call(DescribeNode("n"))).name == "n"
        refusal = await carol.fail(CreateSession("n", b"carol-2"))
        assert refusal.code is ErrorCode.LIMIT_EXCEEDED
        # New handshakes: the new file's tokens only. A client left behind, trying its
        # old secret again and again, is no guesser: its address is not blocked (past
        # --auth-failures-per-minute, 10, a good token from there would be refused).
        for gone in (ALICE, BOB) * 6:
            client = await wire.connect(server.port, hello=False)
            refused = await client.hello(token=gone)
            assert isinstance(refused, Refused)
            assert refused.code is ErrorCode.AUTHENTICATION
            assert "removed or rotated" in refused.message
            await client.close()
        dave = await wire.connect(server.port, token=DAVE)
        assert (await dave.call(DescribeNode("n"))).name == "n"
        # Bob's session kept its recovery window: his new secret attaches it again.
        bob_again = await wire.connect(server.port, token=BOB2)
        attached = await bob_again.call(AttachSession(bobs.session_id, b"bob-key", bobs.seq_no + 1))
        assert isinstance(attached, SessionInfo)
        assert attached.session_id == bobs.session_id
        server.wait_log('"event": "reloaded"')


async def test_a_connection_waiting_for_its_reload_answers_pings_and_holds_its_next_request(
    tmp_path: Path, wire: Clients
) -> None:
    """ReloadFiles is answered once its files are loaded, in a task: the connection's
    next request waits for it (answers in order), but its Pings are answered meanwhile.
    They were not: a reload of 100,000 tokens took longer than a client's ping patience
    (10 s) on a busy machine, and ``tenure reload`` gave its connection up. The reload
    here is held on its auth file, a FIFO the test writes only after the Pong came."""
    text = auth_text(token("admin", ADMIN), token("bob", BOB))
    auth = write_auth_file(tmp_path, text)
    with TenantServer(tmp_path, auth) as server:
        admin = await wire.connect(server.port, token=ADMIN)
        assert await admin.call(CreateNode("n")) is None
        auth.unlink()
        os.mkfifo(auth)  # (the reload's thread opens it, and waits for a writer)
        try:
            reload_id = admin.send(ReloadFiles())
            assert isinstance(await admin.ping(1), Pong)
            assert isinstance(await admin.ping(2), Pong)
            described = admin.send(DescribeNode("n"))
            await asyncio.to_thread(auth.write_text, text)  # the reload goes on
            first, second = await admin.next_event(), await admin.next_event()
        finally:
            with contextlib.suppress(OSError):  # (a reload still waiting: let it end)
                os.close(os.open(auth, os.O_WRONLY | os.O_NONBLOCK))
        assert isinstance(first, Reply), first
        assert first.request_id == reload_id
        assert isinstance(first.value, FilesReloaded)
        assert isinstance(second, Reply), second
        assert second.request_id == described
        assert isinstance(second.value, NodeDescription)
        assert second.value.name == "n"
        assert [type(event) for event in admin.events[2:]] == [Pong, Pong, Reply, Reply]


async def test_an_auth_file_that_does_not_parse_changes_nothing(
    tmp_path: Path, wire: Clients
) -> None:
    auth = write_auth_file(tmp_path, auth_text(token("admin", ADMIN), token("bob", BOB)))
    with TenantServer(tmp_path, auth, http=True) as server:
        bob = await wire.connect(server.port, token=BOB)
        assert await bob.call(CreateNode("n")) is None
        auth.write_text('[[token]]\nname = "admin"\nsecret = \n')  # not TOML
        refused = tenure_reload(server.http_port, ADMIN)
        assert refused.returncode == 3, refused
        assert f"auth file {auth}: not valid TOML" in refused.stderr
        auth.write_text(auth_text(token("admin", ADMIN), token("admin", BOB)))  # a name twice
        reloads(server, "reload_refused")
        assert "the name 'admin' is used twice" in server.output()
        # Nothing changed: bob stays, and a new connection of his is let in.
        assert (await bob.call(DescribeNode("n"))).name == "n"
        again = await wire.connect(server.port, token=BOB)
        assert (await again.call(DescribeNode("n"))).name == "n"
        assert '"event": "reloaded"' not in server.output()
        assert server.proc.poll() is None


async def test_without_an_auth_file_reload_is_sighup_only(tmp_path: Path, wire: Clients) -> None:
    http = free_port()
    with ServerProcess(tmp_path / "data", "--http-port", str(http)) as server:
        client = await wire.connect(server.port)
        refused = tenure_reload(http, ADMIN)
        assert refused.returncode == 3
        assert "no auth file: send it SIGHUP" in refused.stderr
        reloads(server)
        assert await client.call(CreateNode("n")) is None
        assert '"tls": "off"' in server.output()
