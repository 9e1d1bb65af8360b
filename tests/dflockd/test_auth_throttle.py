"""dflockd's ``auth`` throttled per peer address (issue 28).

After ``--auth-failures-per-minute`` wrong secrets from one address, its ``auth``
is answered ``error_auth`` whatever the secret, for ``--auth-block-time``; another
address still logs in. The block is one log line; the refused attempts none.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.dflockd.conftest import SECRET, Raw, Raws, Serve
from tests.server.wire import WAIT

pytestmark = pytest.mark.timeout(60)


async def from_address(port: int, source: str) -> Raw:
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), WAIT
    )
    return Raw(reader, writer)


async def test_wrong_secrets_block_the_address_for_auth(
    serve: Serve, raw: Raws, auth_file: Path
) -> None:
    server = serve(
        *("--auth-file", str(auth_file)),
        *("--auth-failures-per-minute", "2", "--auth-block-time", "600"),
    )
    for guess in ("wrong-1", "wrong-2"):
        conn = await raw.connect(server.port)
        assert await conn.ask("auth", "_", guess) == "error_auth"
    for _ in range(3):  # blocked: the right secret too
        conn = await raw.connect(server.port)
        assert await conn.ask("auth", "_", SECRET) == "error_auth"
        assert await conn.closed()
    other = await from_address(server.port, "127.0.0.2")
    raw.opened.append(other)
    assert await other.ask("auth", "_", SECRET) == "ok"
    assert await other.ask("ping") == "ok"
    lines = [json.loads(line) for line in server.lines() if line.startswith("{")]
    blocks = [line for line in lines if line.get("event") == "auth_throttled"]
    assert [line["peer"] for line in blocks] == ["127.0.0.1"]
    assert len([line for line in lines if line.get("event") == "auth_failed"]) == 2


async def test_good_secrets_between_wrong_ones_do_not_forget_them(
    serve: Serve, raw: Raws, auth_file: Path
) -> None:
    # Issue 37: a login with one's own secret used to wipe the address's failures.
    server = serve(
        *("--auth-file", str(auth_file)),
        *("--auth-failures-per-minute", "2", "--auth-block-time", "600"),
    )
    for guess in ("wrong-1", "wrong-2"):
        good = await raw.connect(server.port)
        assert await good.ask("auth", "_", SECRET) == "ok"
        conn = await raw.connect(server.port)
        assert await conn.ask("auth", "_", guess) == "error_auth"
    blocked = await raw.connect(server.port)
    assert await blocked.ask("auth", "_", SECRET) == "error_auth"
    assert await blocked.closed()
