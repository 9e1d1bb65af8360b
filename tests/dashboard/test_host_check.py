"""The dashboard answers only requests that name an allowed host (``--http-allowed-hosts``):
a DNS-rebinding page (its own name in ``Host``) gets 421, a cross-site page (its name in
``Origin``) 403, and neither ends a session; probes of /healthz and /metrics keep working
under any name."""

from __future__ import annotations

import argparse
from pathlib import Path

import aiohttp
import pytest

from tenure.server._config.hosts import host_of
from tenure.server._config.serve_config import ConfigError, ServeConfig, add_arguments, resolve
from tests.server.wire import WAIT

from .test_dashboard_api import holding, serve

pytestmark = pytest.mark.timeout(60)


async def status_of(http: int, path: str, headers: dict[str, str]) -> int:
    timeout = aiohttp.ClientTimeout(total=WAIT)
    async with (
        aiohttp.ClientSession(timeout=timeout) as client,
        client.get(f"http://127.0.0.1:{http}{path}", headers=headers) as response,
    ):
        await response.read()
        return response.status


async def test_a_rebinding_or_cross_site_page_cannot_end_a_session(tmp_path: Path) -> None:
    for served in serve(tmp_path, "--dashboard-actions", "true"):
        async with holding(served.url, "jobs", "m") as lease:
            body = {"node": "jobs", "session_id": lease.session.id}
            rebinding = {"Host": f"evil.example:{served.http}"}
            status, answer = await served.request("POST", "/kill", body, headers=rebinding)
            assert status == 421
            assert "http_allowed_hosts" in answer["error"]
            cross_site = {"Origin": "http://evil.example"}
            status, answer = await served.request("POST", "/kill", body, headers=cross_site)
            assert status == 403
            assert "http_allowed_hosts" in answer["error"]
            for origin in ("null", "http://127.0.0.1.evil.example", "not a url"):
                status, _ = await served.request("POST", "/kill", body, headers={"Origin": origin})
                assert status == 403, origin
            assert lease.lost_reason is None  # still held
            for path in ("/", "/dashboard/api/board", "/favicon.ico", "/no-such-page"):
                assert await status_of(served.http, path, rebinding) == 421, path
            for path in ("/healthz", "/metrics"):  # machines: any name
                assert await status_of(served.http, path, rebinding) == 200, path
            # The names of this machine's loopback, with or without the port, are fine.
            for host in ("localhost", f"localhost:{served.http}", "127.0.0.1", "[::1]:1"):
                assert await status_of(served.http, "/", {"Host": host}) == 200, host
            same_origin = {"Origin": f"http://127.0.0.1:{served.http}"}
            assert await served.request("POST", "/kill", body, headers=same_origin) == (
                200,
                {"ended": body["session_id"]},
            )


async def test_allowed_hosts_are_configurable(tmp_path: Path) -> None:
    flags = ("--http-allowed-hosts", "tenure.example, Ops.Example.")
    for served in serve(tmp_path, *flags):
        for host in ("tenure.example", "ops.example:8080", "OPS.EXAMPLE", "localhost"):
            assert await status_of(served.http, "/dashboard/api/board", {"Host": host}) == 200
        assert await status_of(served.http, "/", {"Host": "other.example"}) == 421
        origin = {"Host": "tenure.example", "Origin": "https://ops.example"}
        assert await status_of(served.http, "/dashboard/api/board", origin) == 200
    for served in serve(tmp_path / "any", "--http-allowed-hosts", "*"):
        assert await status_of(served.http, "/", {"Host": "whatever.example"}) == 200


def config_of(*argv: str, env: dict[str, str] | None = None) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return resolve(parser.parse_args(list(argv)), env or {})


def test_the_setting_is_a_flag_a_variable_and_checked() -> None:
    assert config_of("--http-allowed-hosts", "a.example").http_allowed_hosts == "a.example"
    env = {"TENURE_HTTP_ALLOWED_HOSTS": "b.example,::1"}
    assert config_of(env=env).http_allowed_hosts == "b.example,::1"
    for bad in ("http://a.example", "a.example:80", "a example", "a.example/x"):
        with pytest.raises(ConfigError, match="host name or address"):
            config_of("--http-allowed-hosts", bad)


@pytest.mark.parametrize(
    ("authority", "host"),
    [
        ("a.example", "a.example"),
        ("A.Example.:80", "a.example"),
        ("[::1]:8080", "::1"),
        ("[::1]", "::1"),
        ("a.example:x", None),
        ("::1", None),
        ("", None),
        ("[::1]x", None),
        ("a@b.example", None),
    ],
)
def test_host_of(authority: str, host: str | None) -> None:
    assert host_of(authority) == host
