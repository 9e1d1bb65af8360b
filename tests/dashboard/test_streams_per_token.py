"""One token cannot hold every dashboard event stream: at most
``--dashboard-max-streams-per-token`` each (per address without ``--auth-file``), one
more answered 429 naming the limit, while another token still gets its page."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp
import pytest

from tests.server.wire import WAIT

from .test_dashboard_api import serve

pytestmark = pytest.mark.timeout(60)

READER, OTHER = "reader-secret-1", "other-secret-2"
AUTH_FILE = f"""
[[token]]
name = "reader"
secret = "{READER}"
access = "read-only"

[[token]]
name = "other"
secret = "{OTHER}"
access = "read-only"
"""


async def open_stream(
    client: aiohttp.ClientSession, stack: AsyncExitStack, url: str, token: str | None
) -> tuple[int, str]:
    """Open an event stream (kept open by ``stack``): its status, and the error if any."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = await stack.enter_async_context(client.get(url, headers=headers))
    if response.status == 200:
        await response.content.readline()  # served: the stream is open
        return 200, ""
    return response.status, (await response.json())["error"]


async def test_one_token_cannot_hold_every_stream(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    flags = ("--auth-file", str(auth), "--dashboard-max-streams", "3")
    for served in serve(tmp_path, *flags, "--dashboard-max-streams-per-token", "2"):
        url = f"http://127.0.0.1:{served.http}/dashboard/api/events"
        timeout = aiohttp.ClientTimeout(total=WAIT)
        async with aiohttp.ClientSession(timeout=timeout) as client, AsyncExitStack() as stack:
            assert await open_stream(client, stack, url, READER) == (200, "")
            assert await open_stream(client, stack, url, READER) == (200, "")
            status, why = await open_stream(client, stack, url, READER)
            assert status == 429
            assert "dashboard_max_streams_per_token (2)" in why
            assert "this token" in why
            # Another token still gets its page: the hoarder took no more than its share.
            assert await open_stream(client, stack, url, OTHER) == (200, "")


async def test_without_tokens_the_limit_is_per_address(tmp_path: Path) -> None:
    for served in serve(tmp_path, "--dashboard-max-streams-per-token", "1"):
        url = f"http://127.0.0.1:{served.http}/dashboard/api/events"
        timeout = aiohttp.ClientTimeout(total=WAIT)
        async with aiohttp.ClientSession(timeout=timeout) as client:
            async with AsyncExitStack() as stack:
                assert await open_stream(client, stack, url, None) == (200, "")
                status, why = await open_stream(client, stack, url, None)
                assert status == 429
                assert "dashboard_max_streams_per_token (1)" in why
                assert "this address" in why
            # The page left (its connection closed): its share comes back.
            for _ in range(50):  # bounded: until the server sees the stream end
                async with AsyncExitStack() as stack:
                    status, _ = await open_stream(client, stack, url, None)
                if status == 200:
                    break
                await asyncio.sleep(0.1)
            assert status == 200
