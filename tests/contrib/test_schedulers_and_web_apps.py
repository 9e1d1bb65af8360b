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
* the APScheduler successor's session killed (its process alive): its scheduler
  stops at once, no job of the lost term runs after the loss, and it leads again
  with a greater token;
* SIGTERM of a leader: it resigns as it stops, and the election is left free (or,
  with a replica waiting, that one takes over at once; on every backend).

The replicas and the election's view are ``tests/contrib/replicas.py``'s. Every
wait is bounded (its ``PATIENCE``); nothing is timed.
"""

from __future__ import annotations

import re
import signal

import pytest

from tests.contrib.replicas import ReplicaProcess, election, leader_and_other, replicas, until
from tests.test_examples import any_backend_env

__all__ = ["any_backend_env"]  # the fixture, from tests/test_examples.py


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
        # More runs, all while the other replica waits in line: it runs none. (Counted
        # from what was read: on a loaded machine each job may have run thrice already.)
        seen = job_tokens(lines)
        ran_jobs(leader, max(len(seen.get(job, [])) for job in ("report", "cleanup")) + 2)
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
