"""Guessing secrets over HTTP is throttled per address (``--auth-failures-per-minute``,
``--auth-block-time``): failed dashboard logins and wrong bearer secrets count, and a
blocked address is answered 429 (a good secret included) while another address goes
on; one log line per block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.server.wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)

READER = "reader-secret-1"


async def call(
    http: int, source: str, path: str, body: Any = None, secret: str | None = None
) -> aiohttp.ClientResponse:
    """``path`` of the dashboard's API from the address ``source`` (POST with ``body``)."""
    headers = {"Authorization": f"Bearer {secret}"} if secret else {}
    connector = aiohttp.TCPConnector(local_addr=(source, 0))
    async with (
        aiohttp.ClientSession(
            connector=connector, timeout=aiohttp.ClientTimeout(total=WAIT)
        ) as client,
        client.request(
            "GET" if body is None else "POST",
            f"http://127.0.0.1:{http}/dashboard/api{path}",
            json=body,
            headers=headers,
        ) as response,
    ):
        await response.read()
        return response


async def test_failed_secrets_block_their_address(tmp_path: Path) -> None:
    (tmp_path / "auth.toml").write_text(
        f'[[token]]\nname = "reader"\nsecret = "{READER}"\naccess = "read-only"\n'
    )
    http = free_port()
    args = ("--http-port", str(http), "--auth-file", str(tmp_path / "auth.toml"))
    limits = ("--auth-failures-per-minute", "3", "--auth-block-time", "30")
    with ServerProcess(tmp_path / "data", "--fsync", "off", *args, *limits) as server:
        for _ in range(3):
            answer = await call(http, "127.0.0.2", "/login", {"secret": "guess"})
            assert answer.status == 401
        blocked = await call(http, "127.0.0.2", "/login", {"secret": READER})
        assert blocked.status == 429  # a good secret too, while blocked
        assert blocked.headers["Retry-After"] == "30"
        assert (await call(http, "127.0.0.2", "/board", secret=READER)).status == 429
        # Another address is not held up by the guesser's block.
        assert (await call(http, "127.0.0.3", "/login", {"secret": READER})).status == 200
        # Wrong bearer secrets count as well.
        for _ in range(3):
            assert (await call(http, "127.0.0.4", "/board", secret="guess")).status == 401
        assert (await call(http, "127.0.0.4", "/board", secret=READER)).status == 429
        assert (await call(http, "127.0.0.3", "/board", secret=READER)).status == 200
        log = server.output()
        assert log.count('"auth_throttled"') == 2, log  # one line per block


async def test_good_logins_between_guesses_do_not_forget_them(tmp_path: Path) -> None:
    # Issue 37: a guesser with a token of its own logged in with it between wrong
    # guesses at another secret, which wiped its address's count.
    (tmp_path / "auth.toml").write_text(
        f'[[token]]\nname = "reader"\nsecret = "{READER}"\naccess = "read-only"\n'
    )
    http = free_port()
    args = ("--http-port", str(http), "--auth-file", str(tmp_path / "auth.toml"))
    limits = ("--auth-failures-per-minute", "3", "--auth-block-time", "30")
    with ServerProcess(tmp_path / "data", "--fsync", "off", *args, *limits):
        for guess in range(3):
            answer = await call(http, "127.0.0.2", "/login", {"secret": f"guess-{guess}"})
            assert answer.status == 401
            if guess < 2:
                ok = await call(http, "127.0.0.2", "/login", {"secret": READER})
                assert ok.status == 200
        assert (await call(http, "127.0.0.2", "/login", {"secret": "guess-3"})).status == 429
