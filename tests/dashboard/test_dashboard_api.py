"""The dashboard's HTTP API on a real ``tenure serve --http-port``, without a browser:
the view's limits and update rate as configured, the event stream, who may end a
session (no tokens: only with ``--dashboard-actions``; tokens: as on the wire), and
what a malformed request is told."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import tenure
from tenure.errors import SessionExpiredError
from tests.server.wire import WAIT, ServerProcess, free_port

pytestmark = pytest.mark.timeout(60)

JOBS_ONLY = "jobs-secret-1"
AUTH_FILE = f"""
[[token]]
name = "jobs-operator"
secret = "{JOBS_ONLY}"
access = "read-write"
nodes = ["jobs"]
"""


class Served:
    """A server, its HTTP port, and requests to its dashboard API."""

    def __init__(self, server: ServerProcess, http: int) -> None:
        self.server = server
        self.http = http
        self.url = f"tenure://127.0.0.1:{server.port}"

    async def request(
        self, method: str, path: str, body: Any = None, token: str | None = None, **kw: Any
    ) -> tuple[int, Any]:
        """(status, JSON answer) of ``method path`` (``body`` sent as JSON)."""
        headers = dict(kw.pop("headers", {}))
        if token:
            headers["Authorization"] = f"Bearer {token}"
        timeout = aiohttp.ClientTimeout(total=WAIT)
        async with (
            aiohttp.ClientSession(timeout=timeout) as client,
            client.request(
                method,
                f"http://127.0.0.1:{self.http}/dashboard/api{path}",
                json=body,
                headers=headers,
                **kw,
            ) as response,
        ):
            return response.status, await response.json(content_type=None)

    async def view(self, token: str | None = None) -> dict[str, Any]:
        """One view (``GET /dashboard/api/board``)."""
        status, answer = await self.request("GET", "/board", token=token)
        assert status == 200, answer
        view: dict[str, Any] = answer["view"]
        return view


def serve(tmp_path: Path, *extra: str) -> Iterator[Served]:
    """A ``tenure serve --http-port`` in ``tmp_path`` (made if missing), for one test."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    http = free_port()
    with ServerProcess(
        tmp_path / "data", "--fsync", "off", "--http-port", str(http), *extra
    ) as server:
        yield Served(server, http)


@asynccontextmanager
async def holding(url: str, node: str, name: str) -> AsyncIterator[tenure.Lock]:
    """A session of ``node`` holding mutex ``name``, in this process (not guarding the
    block: a kill must not cancel the test's own requests)."""
    async with tenure.connect(url, client_name="api-test") as client:
        await client.create_node(node, exist_ok=True)
        session = await client.session(node, description="holder")
        try:
            yield await session.mutex(name).lock()
        finally:
            await session.close()


async def test_the_view_keeps_to_the_limit_and_the_rate_given(tmp_path: Path) -> None:
    # One update per 20 s: a view built now is what every request gets until then.
    for served in serve(tmp_path, "--dashboard-max-semaphores", "2", "--dashboard-rate", "0.05"):
        async with tenure.connect(served.url) as client:
            await client.create_node("jobs")
            first = await served.view()
            assert [n["name"] for n in first["board"]["nodes"]] == ["jobs"]
            assert first["cluster"] is None  # not part of a cluster
            async with client.session("jobs") as session:
                for name in ("c", "a", "b"):
                    await session.semaphore(name).create(limit=3)
                assert await served.view() == first  # not rebuilt within the interval
    for served in serve(tmp_path / "2", "--dashboard-max-semaphores", "2"):
        async with tenure.connect(served.url) as client:
            await client.create_node("jobs")
            async with client.session("jobs") as session:
                for name in ("c", "a", "b"):
                    await session.semaphore(name).create(limit=3)
                [jobs] = (await served.view())["board"]["nodes"]
                assert [s["name"] for s in jobs["semaphores"]] == ["a", "b"]
                assert jobs["semaphores_total"] == 3
                assert (await served.view())["limits"]["semaphores"] == 2


async def _contend(client: tenure.Client, name: str) -> None:
    """One wait on ``name`` of node jobs: held by one session, queued on by another,
    let go to it, let go."""
    async with client.session("jobs") as one, client.session("jobs") as two:
        held = await one.mutex(name).lock()
        waiting = asyncio.ensure_future(two.mutex(name).lock())
        deadline = asyncio.get_running_loop().time() + WAIT
        while not (await one.semaphore(name).describe(waiters=True)).waiters:
            assert asyncio.get_running_loop().time() < deadline, f"no waiter on {name}"
            await asyncio.sleep(0.02)
        await held.release()
        await (await waiting).release()


async def test_the_top_table_is_read_once_per_interval_for_each_window_and_sort(
    tmp_path: Path,
) -> None:
    # One update per 20 s: what the engine answered is what each request gets until
    # then, for its window and sort; another window or sort is a read of its own.
    for served in serve(tmp_path, "--dashboard-rate", "0.05"):
        async with tenure.connect(served.url) as client:
            await client.create_node("jobs")
            await _contend(client, "a")

            async def names(query: str, served: Served = served) -> list[str]:
                status, answer = await served.request("GET", f"/top?{query}")
                assert status == 200, answer
                return sorted(row["name"] for row in answer["names"])

            assert await names("sort=wait") == ["a"]
            await _contend(client, "b")
            assert await names("sort=wait") == ["a"]  # read before b was: kept
            assert await names("sort=grants") == ["a", "b"]
            assert await names("sort=wait&window=300") == ["a", "b"]
            assert len(await names("sort=grants&limit=1")) == 1  # (the same read, cut)
            assert await names("sort=wait") == ["a"]


async def test_the_event_stream_pushes_each_change(tmp_path: Path) -> None:
    for served in serve(tmp_path, "--dashboard-rate", "20"):
        timeout = aiohttp.ClientTimeout(total=WAIT)
        async with (
            aiohttp.ClientSession(timeout=timeout) as client,
            client.get(f"http://127.0.0.1:{served.http}/dashboard/api/events") as stream,
        ):
            assert stream.headers["Content-Type"] == "text/event-stream"

            async def next_view() -> dict[str, Any]:
                for _ in range(100):  # bounded: retry and keep-alive lines come first
                    line = (await stream.content.readline()).decode()
                    if line.startswith("data: "):
                        view: dict[str, Any] = json.loads(line[6:])["view"]
                        return view
                raise AssertionError("no event")

            assert (await next_view())["board"]["nodes"] == []
            async with holding(served.url, "jobs", "m"):
                for _ in range(50):  # bounded: the change comes within a few pushes
                    nodes = (await next_view())["board"]["nodes"]
                    if nodes and nodes[0]["semaphores"]:
                        break
                else:
                    raise AssertionError("the grant was never pushed")
                [owner] = nodes[0]["semaphores"][0]["owners"]
                assert (owner["description"], owner["identity"]["name"]) == ("holder", "api-test")
            # The grant shows in the rate once the server's counters were sampled again.
            for _ in range(100):  # bounded: a sample a second
                if (await next_view())["rates"]["grants"] > 0:
                    break
            else:
                raise AssertionError("the grant rate never moved")


async def test_without_tokens_ending_a_session_needs_dashboard_actions(tmp_path: Path) -> None:
    for served in serve(tmp_path):
        async with holding(served.url, "jobs", "m") as lease:
            assert (await served.view())["board"]["nodes"][0]["can_kill"] is False
            body = {"node": "jobs", "session_id": lease.session.id}
            status, answer = await served.request("POST", "/kill", body)
            assert status == 403
            assert "--dashboard-actions" in answer["error"]
            assert lease.lost_reason is None
    for served in serve(tmp_path / "2", "--dashboard-actions", "true"):
        async with holding(served.url, "jobs", "m") as lease:
            assert (await served.view())["board"]["nodes"][0]["can_kill"] is True
            body = {"node": "jobs", "session_id": lease.session.id}
            assert await served.request("POST", "/kill", body) == (
                200,
                {"ended": body["session_id"]},
            )
            reason = await lease.lost
            assert isinstance(reason, SessionExpiredError)
            # Gone: a second kill, and one of a session that never was, are 404.
            assert (await served.request("POST", "/kill", body))[0] == 404
            assert (await served.request("POST", "/kill", {"node": "jobs", "session_id": 999}))[
                0
            ] == 404


async def test_a_node_limited_token_sees_and_ends_only_its_nodes(tmp_path: Path) -> None:
    auth = tmp_path / "auth.toml"
    auth.write_text(AUTH_FILE)
    for served in serve(tmp_path, "--auth-file", str(auth)):
        url = f"{served.url}?token={JOBS_ONLY}"
        async with holding(url, "jobs", "m"):
            assert (await served.request("GET", "/board"))[0] == 401
            assert (await served.request("GET", "/board", token="wrong"))[0] == 401
            view = await served.view(JOBS_ONLY)
            assert [n["name"] for n in view["board"]["nodes"]] == ["jobs"]
            assert view["board"]["nodes_total"] == 1
            assert (view["token"], view["access"]) == ("jobs-operator", "read-write")
            assert view["board"]["nodes"][0]["can_kill"] is True
            # Another node's session: refused like KillSession on the wire.
            status, answer = await served.request(
                "POST", "/kill", {"node": "billing", "session_id": 1}, JOBS_ONLY
            )
            assert status == 403
            assert "it is limited to jobs" in answer["error"]


async def test_malformed_requests_get_a_clear_answer(tmp_path: Path) -> None:
    for served in serve(tmp_path, "--dashboard-actions", "true"):
        for body, status in [
            ({"node": "jobs"}, 400),
            ({"node": "jobs", "session_id": "1"}, 400),
            ({"node": "jobs", "session_id": True}, 400),
            ({"node": "jobs", "session_id": 0}, 400),
            ([1, 2], 400),
            ({"node": "no-such-node", "session_id": 1}, 404),
        ]:
            got, answer = await served.request("POST", "/kill", body)
            assert got == status, (body, answer)
            assert answer["error"]
        got, answer = await served.request("POST", "/kill", data="node=jobs&session_id=1")
        assert got == 415  # not JSON: what a cross-site form could send
        got, answer = await served.request(
            "POST", "/kill", data=b"{" * 5000, headers={"Content-Type": "application/json"}
        )
        assert got == 413
        got, answer = await served.request("POST", "/login", {"secret": "x"})
        assert got == 400  # no --auth-file: nothing to log in to
        assert "no --auth-file" in answer["error"]


async def test_the_page_forbids_inline_script_and_streams_end_when_the_server_stops(
    tmp_path: Path,
) -> None:
    for served in serve(tmp_path):
        timeout = aiohttp.ClientTimeout(total=WAIT)
        base = f"http://127.0.0.1:{served.http}"
        async with aiohttp.ClientSession(timeout=timeout) as client:
            async with client.get(f"{base}/") as page:
                assert page.status == 200
                assert page.content_type == "text/html"
                policy = page.headers["Content-Security-Policy"]
                assert "script-src 'self'" in policy
                assert "unsafe-inline" not in policy
                assert "/dashboard/app.js" in await page.text()
            async with client.get(f"{base}/dashboard/app.js") as script:
                assert script.status == 200
                assert "textContent" in await script.text()
                assert "innerHTML" not in await script.text()
            async with client.get(f"{base}/dashboard/recipes.js") as script:
                assert script.status == 200
                assert "function kindCell" in await script.text()
                assert "innerHTML" not in await script.text()
            async with client.get(f"{base}/dashboard/api/events") as stream:
                assert (await stream.content.readline()).startswith(b"retry: ")
                assert served.server.signal(signal.SIGTERM) == 0  # within WAIT
                await stream.content.read()  # returns: the stream ended with the server
                assert stream.content.at_eof()


async def test_event_streams_are_bounded_by_dashboard_max_streams(tmp_path: Path) -> None:
    for served in serve(tmp_path, "--dashboard-max-streams", "1"):
        events = f"http://127.0.0.1:{served.http}/dashboard/api/events"
        timeout = aiohttp.ClientTimeout(total=WAIT)
        async with aiohttp.ClientSession(timeout=timeout) as client:
            async with client.get(events) as first:
                assert first.status == 200
                await first.content.readline()  # served: its stream is open
                async with client.get(events) as second:
                    assert second.status == 503
                    answer = await second.json()
                    assert "dashboard_max_streams (1)" in answer["error"]
                first.close()  # the page leaves: its connection is closed
            statuses = []
            for _ in range(50):  # bounded: the server sees the first page leave
                async with client.get(events) as again:
                    statuses.append(again.status)
                    if again.status == 200:
                        break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"a closed stream's slot never came back: {statuses}")


async def test_a_kill_counts_against_its_tokens_requests_per_second(tmp_path: Path) -> None:
    """Issue 47: a kill from the dashboard is a request of its token's, as KillSession is
    on the wire: past its ``requests_per_second`` it is refused 429 and ends nothing."""
    auth = tmp_path / "auth.toml"
    auth.write_text(
        AUTH_FILE
        + """
[[token]]
name = "slow-operator"
secret = "slow-operator-secret"
access = "read-write"
[token.quota]
requests_per_second = 0.01
"""
    )
    for served in serve(tmp_path, "--auth-file", str(auth)):
        url = f"{served.url}?token={JOBS_ONLY}"
        async with holding(url, "jobs", "m"), tenure.connect(url) as client:
            [sid] = [session.session_id for session in await client.list_sessions("jobs")]
            gone = {"node": "jobs", "session_id": sid + 1000}
            slow = "slow-operator-secret"
            assert (await served.request("POST", "/kill", gone, slow))[0] == 404  # its burst
            body = {"node": "jobs", "session_id": sid}
            status, answer = await served.request("POST", "/kill", body, slow)
            assert status == 429, answer
            assert answer["error"] == (
                "token 'slow-operator' is over its quota requests_per_second (0.01)"
            )
            [node] = (await served.view(JOBS_ONLY))["board"]["nodes"]
            assert node["sessions_total"] == 1  # not ended
