"""flask-limiter on ``tenure://``: two replicas of ``examples/limits_flask.py``, each a
real werkzeug server process on a free loopback port, with a real ``tenure serve``
behind them, asked over HTTP. A client's requests count once across both: the
sixth of the minute is refused on either replica.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ports import free_port
from tests.server.wire import ServerProcess
from tests.test_examples import EXAMPLES, ROOT

#: Bound of every wait on a replica, in seconds.
PATIENCE = 30.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Replica:
    """``python examples/limits_flask.py`` serving on a free port."""

    def __init__(self, name: str, url: str, strategy: str) -> None:
        self.name = name
        self.port = free_port()
        env = {
            **os.environ,
            "TENURE_URL": url,
            "REPLICA": name,
            "PORT": str(self.port),
            "RATELIMIT_STRATEGY": strategy,
        }
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")])
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-W", "error", str(EXAMPLES / "limits_flask.py")],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def get(self, path: str) -> tuple[int, str, dict[str, str]]:
        """``GET path``: the status, the body and the headers."""
        try:
            with _OPENER.open(f"http://127.0.0.1:{self.port}{path}", timeout=10) as answer:
                return answer.status, answer.read().decode(), dict(answer.headers)
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode(), dict(refused.headers)

    def wait_up(self) -> None:
        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                if self.get("/health")[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError):
                pass
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} ended: {self.proc.communicate()}")
            assert time.monotonic() < deadline, f"{self.name} never answered"
            time.sleep(0.05)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=PATIENCE)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with ServerProcess(tmp_path_factory.mktemp("flask") / "data", "--fsync", "off") as server:
        yield server


@pytest.fixture
def replicas(request: pytest.FixtureRequest, server: ServerProcess) -> Iterator[list[Replica]]:
    url = f"tenure://127.0.0.1:{server.port}"
    started = [Replica(name, url, request.param) for name in ("a", "b")]
    try:
        for replica in started:
            replica.wait_up()
        yield started
    finally:
        for replica in started:
            replica.kill()


@pytest.mark.parametrize("replicas", ["fixed-window", "moving-window"], indirect=True)
def test_two_replicas_share_each_clients_limit(replicas: list[Replica]) -> None:
    a, b = replicas
    remaining = []
    for replica in (a, b, a, b, a):
        status, body, headers = replica.get("/ping")
        assert (status, body) == (200, f"pong from {replica.name}\n")
        assert headers["X-RateLimit-Limit"] == "5"
        remaining.append(int(headers["X-RateLimit-Remaining"]))
    assert remaining == [4, 3, 2, 1, 0]  # one count, whichever replica answered
    for replica in (b, a):
        status, _, headers = replica.get("/ping")
        assert status == 429
        assert headers["X-RateLimit-Remaining"] == "0"
        assert int(headers["Retry-After"]) > 0
    assert a.get("/health")[0] == b.get("/health")[0] == 200  # exempt


def test_the_example_is_listed_and_says_how_to_run_it() -> None:
    source = (EXAMPLES / "limits_flask.py").read_text()
    assert "python examples/limits_flask.py" in source
    assert "limits_flask.py" in (EXAMPLES / "README.md").read_text()
    assert "limits_flask.py" in Path(ROOT / "docs" / "integrations.md").read_text()
