"""APScheduler 3 and FastAPI replicas that run their work on the leader only.

``examples/leader_apscheduler.py`` and ``examples/leader_fastapi.py`` (under a real
uvicorn) run as replica processes of their own, two at a time, against one backend
they share. The tests read what each replica prints (and the FastAPI one's ``GET
/status``), and the election itself through a client of their own:

* exactly one replica runs the work while the other waits in line behind it;
* ``kill -9`` of the leader's process: nothing is resigned, the store ends its
  session after the recovery window (``RECOVERY_WINDOW``, 1 s here), and the other
  replica takes over with a greater token: every run of the killed leader carried a
  smaller token than the first run of its successor;
* SIGTERM of a leader: it resigns as it stops, and the election is left free (or,
  with a replica waiting, that one takes over at once; on every backend).

Every wait is bounded (:data:`PATIENCE`); nothing is timed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import IO, TypeVar

import pytest

import tenure.sync
from tenure import OwnerInfo
from tenure.errors import NotFoundError
from tests.ports import free_port
from tests.test_examples import EXAMPLES, ROOT, any_backend_env

__all__ = ["any_backend_env"]  # the fixture, from tests/test_examples.py

#: Bound of every wait on a replica or the election, in seconds.
PATIENCE = 30.0
#: The replicas' recovery window (``RECOVERY_WINDOW``), in seconds.
WINDOW = 1.0
_POLL = 0.05
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

T = TypeVar("T")


def until(what: str, found: Callable[[], T | None]) -> T:
    """Poll ``found()`` until it returns something, at most :data:`PATIENCE` seconds."""
    deadline = time.monotonic() + PATIENCE
    while (value := found()) is None:
        assert time.monotonic() < deadline, f"still not: {what}"
        time.sleep(_POLL)
    return value


class ReplicaProcess:
    """``python examples/NAME`` as the replica ``name`` (``REPLICA``), its lines read as they come.

    Its ``PORT`` is free, for a web replica; its ``RECOVERY_WINDOW`` is :data:`WINDOW`.
    """

    def __init__(self, example: str, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.port = free_port()  # where a web replica serves
        full = {**os.environ, **env, "REPLICA": name, "PORT": str(self.port)}
        full["RECOVERY_WINDOW"] = str(WINDOW)
        full["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(ROOT / "src"), full.get("PYTHONPATH")])
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-W", "error", str(EXAMPLES / example)],
            cwd=ROOT,
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._out: list[str] = []
        self._err: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(stream, into), daemon=True)
            for stream, into in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str] | None, into: list[str]) -> None:
        assert stream is not None
        with stream:
            for line in stream:
                into.append(line.rstrip("\n"))  # (list.append is atomic: no lock needed)

    def lines(self) -> list[str]:
        """What it printed so far, line by line."""
        return list(self._out)

    def stderr(self) -> str:
        """What it wrote to stderr so far."""
        return "\n".join(self._err)

    def alive(self) -> None:
        """Fail if the process has ended."""
        code = self.proc.poll()
        assert code is None, f"{self.name} ended ({code}): {self.lines()} {self.stderr()}"

    def _ended(self) -> int:
        code = self.proc.wait(timeout=PATIENCE)
        for reader in self._readers:
            reader.join(PATIENCE)
        return code

    def kill(self) -> None:
        """``kill -9``: nothing is resigned, nothing closed; reaped, its output all read."""
        self.proc.send_signal(signal.SIGKILL)
        assert self._ended() == -signal.SIGKILL

    def stop(self) -> int:
        """SIGTERM (the replica stops: it resigns); its exit status once it ended."""
        self.proc.send_signal(signal.SIGTERM)
        return self._ended()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self._ended()

    def status(self) -> dict[str, object] | None:
        """A web replica's ``GET /status``, or None while it does not answer yet."""
        try:
            with _OPENER.open(f"http://127.0.0.1:{self.port}/status", timeout=5) as answer:
                found: dict[str, object] = json.loads(answer.read())
                return found
        except (urllib.error.URLError, ConnectionError):
            self.alive()
            return None


@contextmanager
def replicas(example: str, names: list[str], env: dict[str, str]) -> Iterator[list[ReplicaProcess]]:
    """Start a replica process per name; kill whichever is left at the end."""
    with ExitStack() as stack:
        started: list[ReplicaProcess] = []
        for name in names:
            replica = ReplicaProcess(example, name, env)
            stack.callback(replica.close)
            started.append(replica)
        yield started


class Election:
    """An election as the store holds it, read (and its leader's session killed, as an
    operator would) through a client of the test's own."""

    def __init__(self, client: tenure.sync.Client, session: tenure.sync.Session, name: str) -> None:
        self.client = client
        self.node = session.node
        self.semaphore = session.semaphore(name)

    def kill_session(self, grant: OwnerInfo) -> None:
        """End the session that holds ``grant`` (``tenure kill-session``)."""
        self.client.kill_session(self.node, grant.session_id)

    def holders(self) -> tuple[list[OwnerInfo], list[bytes]]:
        """Its leader's grant (none or one) and its waiters' data, in line."""
        try:
            found = self.semaphore.describe(owners=True, waiters=True)
        except NotFoundError:  # nobody campaigned yet, or the last one left
            return [], []
        return list(found.owners), [waiter.data for waiter in found.waiters]

    def line(self) -> tuple[list[tuple[bytes, int]], list[bytes]]:
        """Who leads (its data, its token) and who waits (their data), in order."""
        owners, waiters = self.holders()
        return [(owner.data, owner.token) for owner in owners], waiters

    def leader_with(self, waiting: int) -> OwnerInfo:
        """Until one leads with ``waiting`` replicas in line behind it: the leader's grant."""

        def found() -> OwnerInfo | None:
            owners, waiters = self.holders()
            return owners[0] if len(owners) == 1 and len(waiters) == waiting else None

        return until(f"a leader and {waiting} waiting: {self.holders()}", found)

    def free(self) -> None:
        """Until nobody leads and nobody waits."""
        until(f"a free election: {self.holders()}", lambda: self.holders() == ([], []) or None)


@contextmanager
def election(url: str, node: str, name: str) -> Iterator[Election]:
    """A view of the election ``name`` of ``node`` (created here if the replicas did not yet)."""
    with tenure.sync.connect(url) as client:
        client.create_node(node, exist_ok=True)
        with client.session(node, description="test: the election's view") as session:
            yield Election(client, session, name)


def leader_and_other(
    started: list[ReplicaProcess], leader: OwnerInfo
) -> tuple[ReplicaProcess, ReplicaProcess]:
    """The replica whose name the leader's grant carries, and the other one."""
    first, second = started
    return (first, second) if leader.data == first.name.encode() else (second, first)


# -- APScheduler --------------------------------------------------------------------------

_JOB = re.compile(r"(\w+): job (\w+) ran with token (\d+)$")


def job_tokens(lines: list[str]) -> dict[str, list[int]]:
    """Job name -> the token of each of its runs, in the order printed."""
    runs: dict[str, list[int]] = {}
    for m in filter(None, map(_JOB.match, lines)):
        runs.setdefault(m[2], []).append(int(m[3]))
    return runs


def ran_jobs(replica: ReplicaProcess, times: int, since: str | None = None) -> list[str]:
    """Until both jobs have run ``times`` times on ``replica`` (after its line ``since``,
    if given): its lines (after ``since``)."""

    def found() -> list[str] | None:
        replica.alive()
        lines = replica.lines()
        if since is not None:
            if since not in lines:
                return None
            lines = lines[lines.index(since) + 1 :]
        runs = job_tokens(lines)
        enough = all(len(runs.get(job, [])) >= times for job in ("report", "cleanup"))
        return lines if enough else None

    return until(f"{replica.name} ran each job {times} times: {replica.lines()}", found)


@pytest.mark.parametrize("any_backend_env", ["tenure", "redis"], indirect=True)
def test_apscheduler_jobs_run_on_one_replica_and_move_when_it_is_killed(
    any_backend_env: dict[str, str],
) -> None:
    url = any_backend_env["TENURE_URL"]
    with (
        election(url, "apscheduler-demo", "scheduler") as scheduler,
        replicas("leader_apscheduler.py", ["a", "b"], any_backend_env) as started,
    ):
        grant = scheduler.leader_with(waiting=1)
        leader, other = leader_and_other(started, grant)
        lines = ran_jobs(leader, 1)
        ran = len(lines)
        # More runs, all while the other replica waits in line: it runs none.
        ran_jobs(leader, 3)
        assert scheduler.line() == ([(grant.data, grant.token)], [other.name.encode()])
        assert other.lines() == [f"{other.name}: campaigning; the jobs run on the leader only"]
        assert len(leader.lines()) > ran

        leader.kill()
        lines = leader.lines()
        assert lines[:2] == [
            f"{leader.name}: campaigning; the jobs run on the leader only",
            f"{leader.name}: leading with token {grant.token}: its scheduler runs",
        ]
        killed = job_tokens(lines)
        assert len(lines) == 2 + sum(map(len, killed.values()))  # jobs only, to the end
        assert {token for tokens in killed.values() for token in tokens} == {grant.token}

        # The store ends the dead leader's session after its window: the other leads.
        lines = ran_jobs(other, 2)
        successor = scheduler.leader_with(waiting=0)
        assert successor.data == other.name.encode()
        assert successor.token > grant.token
        assert lines[:2] == [
            f"{other.name}: campaigning; the jobs run on the leader only",
            f"{other.name}: leading with token {successor.token}: its scheduler runs",
        ]
        took_over = job_tokens(lines)
        assert {token for tokens in took_over.values() for token in tokens} == {successor.token}
        # By tokens: the killed leader's last run came before its successor's first.
        assert max(max(tokens) for tokens in killed.values()) < min(
            min(tokens) for tokens in took_over.values()
        )

        # Its session killed (leadership lost, the process alive): its scheduler stops
        # at once, and its runner leads again in a new session, nobody else waiting.
        scheduler.kill_session(successor)
        lost = f"{other.name}: lost leadership (SessionExpiredError)"
        after = ran_jobs(other, 1, since=lost)
        again = scheduler.leader_with(waiting=0)
        assert again.data == other.name.encode()
        assert again.token > successor.token
        assert after[0] == f"{other.name}: leading with token {again.token}: its scheduler runs"
        assert {token for tokens in job_tokens(after).values() for token in tokens} == {
            again.token
        }, "a job of the lost term ran after its loss"

        # SIGTERM: it stops its scheduler and resigns; nobody leads.
        assert other.stop() == 0, other.stderr()
        assert other.lines()[-1] == f"{other.name}: stopped, resigned"
        assert other.stderr() == ""
        scheduler.free()


# -- FastAPI under uvicorn ----------------------------------------------------------------


def leading(replica: ReplicaProcess) -> dict[str, object]:
    """Until ``replica``'s ``GET /status`` says it leads and its job ran: that status."""

    def found() -> dict[str, object] | None:
        status = replica.status()
        return status if status is not None and status["leading"] and status["runs"] else None

    return until(f"{replica.name} runs the job: {replica.status()}", found)


def ran_more(replica: ReplicaProcess, than: int) -> None:
    """Until ``replica`` leads and its job ran more than ``than`` times."""

    def found() -> dict[str, object] | None:
        status = leading(replica)
        return status if number(status, "runs") > than else None

    until(f"{replica.name} ran the job more than {than} times", found)


def number(status: dict[str, object], key: str) -> int:
    """An integer of a status (its token, its runs...)."""
    value = status[key]
    assert isinstance(value, int), status
    return value


def waiting(replica: ReplicaProcess) -> dict[str, object]:
    """``replica``'s status once it answers: it must not have run the job, ever."""
    status = until(f"{replica.name} answers", replica.status)
    assert status == {
        "replica": replica.name,
        "leading": False,
        "token": None,
        "runs": 0,
        "terms": 0,
    }
    return status


def test_fastapi_runs_the_job_on_one_replica_and_moves_it_when_it_stops(
    any_backend_env: dict[str, str],
) -> None:
    shared = "TENURE_URL" in any_backend_env  # memory:// lives in one process
    with replicas("leader_fastapi.py", ["a", "b"] if shared else ["a"], any_backend_env) as started:
        if shared:
            with election(any_backend_env["TENURE_URL"], "fastapi-demo", "background-job") as job:
                grant = job.leader_with(waiting=1)
            leader, other = leader_and_other(started, grant)
            others = [other]
        else:
            (leader,), others = started, []
        status = leading(leader)
        for other in others:
            waiting(other)

        # uvicorn ends its lifespan, then exits by the signal it caught, as asked.
        assert leader.stop() in (0, -signal.SIGTERM), leader.stderr()
        assert "Traceback" not in leader.stderr()
        assert leader.lines() == [
            f"{leader.name}: leading with token {status['token']}: the job runs here",
            f"{leader.name}: stopped, resigned",
        ]
        for other in others:  # it resigned: the other takes over at once
            now = leading(other)
            assert number(now, "token") > number(status, "token")
            assert other.stop() in (0, -signal.SIGTERM), other.stderr()
            assert other.lines()[0] == (
                f"{other.name}: leading with token {now['token']}: the job runs here"
            )


@pytest.mark.parametrize("any_backend_env", ["tenure", "redis"], indirect=True)
def test_fastapi_job_moves_to_the_other_replica_when_the_leader_is_killed(
    any_backend_env: dict[str, str],
) -> None:
    url = any_backend_env["TENURE_URL"]
    with (
        election(url, "fastapi-demo", "background-job") as job,
        replicas("leader_fastapi.py", ["a", "b"], any_backend_env) as started,
    ):
        grant = job.leader_with(waiting=1)
        leader, other = leader_and_other(started, grant)
        status = leading(leader)
        assert status["token"] == grant.token
        waiting(other)
        assert job.line() == ([(grant.data, grant.token)], [other.name.encode()])
        ran_more(leader, number(status, "runs"))
        waiting(other)

        leader.kill()
        assert leader.lines() == [
            f"{leader.name}: leading with token {grant.token}: the job runs here"
        ]
        # The store ends the dead leader's session after its window: the other leads.
        now = leading(other)
        successor = job.leader_with(waiting=0)
        assert successor.data == other.name.encode()
        assert number(now, "token") == successor.token > grant.token
        assert now["terms"] == 1

        # SIGTERM: the lifespan ends, the runner resigns; nobody leads.
        assert other.stop() in (0, -signal.SIGTERM), other.stderr()
        assert "Traceback" not in other.stderr()
        assert other.lines() == [
            f"{other.name}: leading with token {successor.token}: the job runs here",
            f"{other.name}: stopped, resigned",
        ]
        job.free()
