"""A real headless Chromium for the dashboard tests, and the processes they drive.

The browser is Debian's ``chromium`` (``scripts/bootstrap test`` installs it),
driven by Playwright with ``executable_path``: Playwright's own browser downloads
are never used. Where chromium or Playwright is missing the tests skip, saying so,
on a developer's machine, and *fail* under ``CI=true``: CI must never go green by
not testing (as the etcd tests do: :func:`tests.etcd.fixtures.require_etcd`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tenure.testing.conformance.harness import in_ci
from tests.server.wire import WAIT, ServerProcess, free_port

from .holder import RECOVERY_WINDOW

#: The browser: Debian's chromium, or another Chromium named by TENURE_CHROMIUM.
CHROMIUM = os.environ.get("TENURE_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]


def chromium_unavailable() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing: apt-get install chromium (scripts/bootstrap test does)"
    try:
        import playwright.sync_api  # noqa: F401  (only to find out that it is there)
    except ImportError:
        return "playwright is missing: pip install -e '.[test]'"
    return None


def require_chromium() -> None:
    """Skip the test when the browser is missing here; fail it instead under ``CI=true``."""
    reason = chromium_unavailable()
    if reason is not None:
        if in_ci():
            pytest.fail(f"{reason} (CI=true: a missing browser is a failure, never a skip)")
        pytest.skip(reason)


class Holder:
    """``tests/dashboard/holder.py`` in a process of its own, holding a mutex (or leading
    an election)."""

    def __init__(
        self,
        url: str,
        node: str,
        name: str,
        description: str,
        client: str,
        *,
        queued: bool = False,
        leader_data: str | None = None,
        recovery_window: float | None = None,
    ) -> None:
        """Start it; unless ``queued`` (it waits behind another holder), until it holds.
        With ``leader_data`` it leads the election ``name`` instead, with that data;
        with ``recovery_window``, its session has that window."""
        args = [url, node, name, description, client]
        if leader_data is not None:
            args.append(leader_data)
        env = dict(os.environ)
        if recovery_window is not None:
            env[RECOVERY_WINDOW] = str(recovery_window)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.dashboard.holder", *args],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        self.grant: dict[str, Any] = {}
        if not queued:
            self.granted()

    def granted(self) -> dict[str, Any]:
        """Until it holds the mutex: what it said (token, session id, host, pid)."""
        self.grant = self.read()
        assert "token" in self.grant, self.grant
        return self.grant

    def read(self) -> dict[str, Any]:
        """Its next JSON line (within the process's own lifetime bound)."""
        stdout: IO[str] | None = self.proc.stdout
        assert stdout is not None
        line = stdout.readline()
        if not line:
            self.proc.wait(timeout=WAIT)
            assert self.proc.stderr is not None
            raise AssertionError(f"holder exited {self.proc.returncode}: {self.proc.stderr.read()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def step(self) -> None:
        """Take its next step (release; then exit)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """End it (killed if it does not end on its own at once)."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=WAIT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class Served:
    """A server with its HTTP endpoint: ``url`` for clients, ``http`` the page's port."""

    def __init__(self, server: ServerProcess, http: int) -> None:
        self.server = server
        self.http = http
        self.url = f"tenure://127.0.0.1:{server.port}"

    @property
    def page_url(self) -> str:
        """The dashboard."""
        return f"http://127.0.0.1:{self.http}/"


def serve(tmp_path: Path, *extra: str) -> Iterator[Served]:
    """A ``tenure serve --http-port`` for one test (``--dashboard-rate 10``); killed after it."""
    http = free_port()
    args = ("--fsync", "off", "--http-port", str(http), "--dashboard-rate", "10", *extra)
    with ServerProcess(tmp_path / "data", *args) as server:
        yield Served(server, http)


def post(port: int, path: str, body: object, token: str | None = None) -> tuple[int, Any]:
    """POST JSON to the HTTP endpoint on ``port``: (status, the JSON answer)."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=WAIT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def get(port: int, path: str) -> tuple[int, Any]:
    """GET from the HTTP endpoint on ``port``: (status, the JSON answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_until(check: Any, what: str) -> None:
    """Until ``check()`` is true, within WAIT."""
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)
