"""rediss://: TLS to a redis-server with a certificate of a test CA (trustme), and mTLS."""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

import tenure
from tenure.errors import UnavailableError
from tests.redis.fixtures import require_redis
from tests.redis.server import RedisError, RedisServer
from tests.server.wire import free_port


async def test_tls_with_a_ca_and_mutual_tls(tmp_path: Path) -> None:
    require_redis()
    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1")
    client_cert = ca.issue_cert("tenure-client")
    ca_file, cert_file = tmp_path / "ca.pem", tmp_path / "server.pem"
    client_file = tmp_path / "client.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server_cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    client_cert.private_key_and_cert_chain_pem.write_to_path(str(client_file))
    tls_port = free_port()
    extra = [
        f"tls-port {tls_port}",
        f"tls-cert-file {cert_file}",
        f"tls-key-file {cert_file}",
        f"tls-ca-cert-file {ca_file}",
        "tls-auth-clients yes",
    ]
    try:
        server = RedisServer(tmp_path / "redis", extra=extra).open()
    except RedisError as error:  # a redis-server built without TLS
        pytest.skip(f"redis-server cannot serve TLS here: {error}")
    try:
        url = f"rediss://127.0.0.1:{tls_port}/0?ca={ca_file}&cert={client_file}&key={client_file}"
        async with tenure.connect(url) as client:
            await client.create_node("n")
            async with client.session("n") as session:
                lock = await session.mutex("m").lock()
                assert lock.token >= 1
        # Without a client certificate the server refuses the handshake.
        with pytest.raises(UnavailableError):
            await tenure.connect(f"rediss://127.0.0.1:{tls_port}/0?ca={ca_file}", connect_timeout=1)
    finally:
        server.close()
