"""The dashboard's login on a real server: its cookie holds a signed ticket, never the
token's secret (HttpOnly, SameSite=Strict, Max-Age; Secure over https), a copy of it
is refused after logout, and the old cookie (the secret, base64) is refused; then the
page over https (``--http-tls-cert``) in Chromium, its certificate checked with
Python's ssl."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.server.wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)

READER = "reader-secret-1"
AUTH_FILE = f'[[token]]\nname = "reader"\nsecret = "{READER}"\naccess = "read-only"\n'


def serve(tmp_path: Path, *extra: str) -> Iterator[int]:
    """A server with an auth file and ``--http-port``: the HTTP port."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "auth.toml").write_text(AUTH_FILE)
    http = free_port()
    args = ("--fsync", "off", "--http-port", str(http), "--auth-file", str(tmp_path / "auth.toml"))
    with ServerProcess(tmp_path / "data", *args, *extra):
        yield http


async def call(
    http: int, method: str, path: str, cookie: str | None = None, body: Any = None
) -> tuple[int, Any, aiohttp.ClientResponse]:
    """(status, JSON answer, response) of one request, with only ``cookie`` sent."""
    headers = {"Cookie": f"tenure_dashboard={cookie}"} if cookie else {}
    async with (
        aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=WAIT), cookie_jar=aiohttp.DummyCookieJar()
        ) as client,
        client.request(
            method, f"http://127.0.0.1:{http}/dashboard/api{path}", json=body, headers=headers
        ) as response,
    ):
        return response.status, await response.json(content_type=None), response


async def test_the_cookie_is_a_ticket_a_logout_revokes(tmp_path: Path) -> None:
    for http in serve(tmp_path, "--dashboard-ticket-ttl", "600"):
        status, answer, response = await call(http, "POST", "/login", body={"secret": READER})
        assert status == 200, answer
        [header] = response.headers.getall("Set-Cookie")
        morsel = SimpleCookie(header)["tenure_dashboard"]
        ticket = morsel.value
        assert READER not in ticket
        assert base64.urlsafe_b64encode(READER.encode()).decode().rstrip("=") not in ticket
        assert morsel["httponly"]
        assert morsel["samesite"] == "Strict"
        assert morsel["max-age"] == "600"
        assert not morsel["secure"]  # plain http
        status, answer, _ = await call(http, "GET", "/board", ticket)
        assert status == 200, answer
        assert answer["view"]["token"] == "reader"
        # The old cookie, the secret itself in base64: no longer a way in.
        old = base64.urlsafe_b64encode(READER.encode()).decode()
        assert (await call(http, "GET", "/board", old))[0] == 401
        # A copy of the cookie, kept by someone else: refused once the owner logs out.
        status, answer, _ = await call(http, "POST", "/logout", ticket, {})
        assert status == 200, answer
        assert answer == {"revoked": True}
        assert (await call(http, "GET", "/board", ticket))[0] == 401
        # A bearer header with the secret still works for API clients.
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=WAIT)) as client,
            client.get(
                f"http://127.0.0.1:{http}/dashboard/api/board",
                headers={"Authorization": f"Bearer {READER}"},
            ) as response,
        ):
            assert response.status == 200


async def test_a_logout_outlives_a_restart_and_other_logins_do_too(tmp_path: Path) -> None:
    tickets: dict[str, str] = {}
    for http in serve(tmp_path, "--dashboard-ticket-ttl", "600"):
        for who in ("gone", "kept"):
            status, answer, response = await call(http, "POST", "/login", body={"secret": READER})
            assert status == 200, answer
            tickets[who] = SimpleCookie(response.headers["Set-Cookie"])["tenure_dashboard"].value
        assert (await call(http, "POST", "/logout", tickets["gone"], {}))[1] == {"revoked": True}
    assert (tmp_path / "data" / "dashboard-logouts.json").exists()
    for http in serve(tmp_path, "--dashboard-ticket-ttl", "600"):  # the same data directory
        assert (await call(http, "GET", "/board", tickets["gone"]))[0] == 401
        status, answer, _ = await call(http, "GET", "/board", tickets["kept"])
        assert status == 200, answer
