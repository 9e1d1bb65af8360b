"""YDB calls with bad tickets, and failed Logins, throttled per peer address (issue 28).

After ``--auth-failures-per-minute`` failures from one address, its calls are
answered UNAUTHORIZED whatever their ticket, and its Logins too, for
``--auth-block-time``. The native port shares the count: the address's Hello is
refused as well, while another address's goes through.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tenure._protocol import Refused, Welcome
from tests.server.wire import WAIT, WireClient
from tests.ydb_face.conftest import start_server
from tests.ydb_face.raw import QUIET, Status
from tests.ydb_face.test_auth import ADMIN, auth_file, login, ticket, user_of, who_am_i

pytestmark = pytest.mark.timeout(60)


async def native_hello(port: int, source: str) -> object:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), WAIT
    )
    client = WireClient(reader, writer)
    try:
        return await client.hello(token=ADMIN)
    finally:
        await client.close()


async def test_bad_tickets_and_logins_block_the_address(tmp_path: Path) -> None:
    flags = (
        *("--auth-file", str(auth_file(tmp_path)), *QUIET),
        *("--auth-failures-per-minute", "3", "--auth-block-time", "600"),
    )
    server = start_server(tmp_path / "data", *flags)
    try:
        assert user_of(await who_am_i(server, ticket(ADMIN))) == "admin"
        for guess in ("bad-1", "bad-2"):
            operation = await who_am_i(server, ticket(guess))
            assert operation.status == Status.UNAUTHORIZED, operation
        assert (await login(server, "admin", "bad-3")).status == Status.UNAUTHORIZED
        # Blocked: a good ticket, and a good login, are refused now.
        operation = await who_am_i(server, ticket(ADMIN))
        assert operation.status == Status.UNAUTHORIZED, operation
        assert "too many authentication failures" in str(operation.issues)
        assert (await login(server, "admin", ADMIN)).status == Status.UNAUTHORIZED
        # One count for every listener: the native port refuses this address too.
        assert isinstance(await native_hello(server.process.port, "127.0.0.1"), Refused)
        assert isinstance(await native_hello(server.process.port, "127.0.0.2"), Welcome)
        lines = [
            json.loads(line)
            for line in server.process.output().splitlines()
            if line.startswith("{")
        ]
        assert len([line for line in lines if line.get("event") == "auth_throttled"]) == 1
    finally:
        server.process.kill()
