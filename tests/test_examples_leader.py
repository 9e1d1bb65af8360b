"""The leader runner's examples (``client.lead``), on each of the five backends.

``leader.py`` and ``leader_apscheduler.py`` run as ``tests/test_examples.py`` runs every
example (two clients in one process; ``TENURE_URL`` picks the backend) and must print
their story line by line. ``leader_fastapi.py`` is a service: two replicas of it run
under a real uvicorn on free loopback ports (one on ``memory://``, which two processes
cannot share), and the test asks each ``GET /status``: exactly one runs the job, and
when it is stopped (SIGTERM) the other takes over with a greater token.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from tests.ports import free_port
from tests.test_examples import EXAMPLES, ROOT, any_backend_env, matches, run_example

__all__ = ["any_backend_env"]  # the fixture, from tests/test_examples.py

#: Bound of every wait on a replica, in seconds.
PATIENCE = 30.0
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def test_leader_hands_over_when_work_returns_and_outlives_a_killed_session(
    any_backend_env: dict[str, str],
) -> None:
    lines = run_example("leader.py", any_backend_env)
    tokens = [int(m[1]) for m in matches(r"host-[ab]: leading(?: again)?, token (\d+)", lines)]
    first, second, third = tokens
    assert first < second < third
    assert lines == [
        f"host-a: leading, token {first}",
        "host-b: waiting its turn",
        f"host-a: round 1 of the schedule, token {first}",
        f"host-a: round 2 of the schedule, token {first}",
        f"host-a: round 3 of the schedule, token {first}",
        "host-a: work done, resigned, lead() returned",
        f"host-b: leading, token {second}, greater: True",
        "observer: the leader is host-b",
        "host-b: work cancelled (SessionExpiredError)",
        f"host-b: leading again, token {third}, in a new session: True",
        "host-b: work cancelled (stopped)",
        "observer: the leader is None",
    ]


def test_leader_apscheduler_runs_the_jobs_on_the_leader_only(
    any_backend_env: dict[str, str],
) -> None:
    lines = run_example("leader_apscheduler.py", any_backend_env)
    first, second = (int(m[1]) for m in matches(r"replica-\d: leading, token (\d+)", lines))
    assert first < second
    assert lines == [
        f"replica-1: leading, token {first}: its scheduler runs the jobs",
        "replica-1: the job ran 3 times or more; on replica-2: 0 times",
        "replica-1: lost leadership (SessionExpiredError), scheduler shut down",
        f"replica-2: leading, token {second}: its scheduler runs the jobs",
        f"replica-2: the job ran 3 times or more, all with token {second}: True",
        "replica-1: no job ran after its loss: True",
    ]


class Replica:
    """``python examples/leader_fastapi.py`` on a free port, under a real uvicorn."""

    def __init__(self, name: str, extra_env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()
        env = {**os.environ, **extra_env, "REPLICA": name, "PORT": str(self.port)}
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")])
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-W", "error", str(EXAMPLES / "leader_fastapi.py")],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def status(self) -> dict[str, object] | None:
        """Its ``GET /status``, or None while it does not answer yet."""
        try:
            with _OPENER.open(f"http://127.0.0.1:{self.port}/status", timeout=5) as answer:
                found: dict[str, object] = json.loads(answer.read())
                return found
        except (urllib.error.URLError, ConnectionError):
            assert self.proc.poll() is None, f"{self.name} ended: {self.proc.communicate()}"
            return None

    def stop(self) -> tuple[int, str, str]:
        """SIGTERM (uvicorn ends the app's lifespan); its status, stdout and stderr."""
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=PATIENCE)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@contextmanager
def replicas(names: list[str], env: dict[str, str]) -> Iterator[list[Replica]]:
    started = [Replica(name, env) for name in names]
    try:
        yield started
    finally:
        for replica in started:
            replica.kill()


def until_one_leads(among: list[Replica]) -> tuple[Replica, dict[str, object]]:
    """Poll every replica until exactly one runs the job (it ran once at least)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        statuses = [replica.status() for replica in among]
        leading = [
            (replica, status)
            for replica, status in zip(among, statuses, strict=True)
            if status is not None and status["leading"] and status["runs"]
        ]
        if None not in statuses and leading:
            assert len(leading) == 1, statuses  # never two
            return leading[0]
        assert time.monotonic() < deadline, f"no replica runs the job: {statuses}"
        time.sleep(0.05)


def test_leader_fastapi_runs_the_job_on_one_replica_and_moves_it_when_it_stops(
    any_backend_env: dict[str, str],
) -> None:
    shared = "TENURE_URL" in any_backend_env  # memory:// lives in one process
    with replicas(["a", "b"] if shared else ["a"], any_backend_env) as started:
        leader, leading = until_one_leads(started)
        others = [replica for replica in started if replica is not leader]
        for other in others:
            assert other.status() == {
                "replica": other.name,
                "leading": False,
                "token": None,
                "runs": 0,
                "terms": 0,
            }

        status, out, err = leader.stop()

        # (uvicorn ends its lifespan, then exits by the signal it caught, as asked.)
        assert status in (0, -signal.SIGTERM), err
        assert "Traceback" not in err
        assert out.splitlines() == [
            f"{leader.name}: leading with token {leading['token']}: the job runs here",
            f"{leader.name}: stopped, resigned",
        ]
        for other in others:
            successor, now = until_one_leads([other])
            token = now["token"]
            assert isinstance(token, int)
            assert isinstance(leading["token"], int)
            assert token > leading["token"]
            status, out, err = successor.stop()
            assert status in (0, -signal.SIGTERM), err
            assert (
                out.splitlines()[0]
                == f"{other.name}: leading with token {token}: the job runs here"
            )
