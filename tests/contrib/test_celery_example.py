"""``examples/celery_reports.py``, run as a user would: its own worker, its story told.

Twice: with nothing given (it starts a throwaway redis-server and ``tenure serve``
of its own, as on a laptop), and against the tests' Redis as both the broker and
the tenure backend (``redis://``: the Singleton keys and claims live in Redis too).
"""

from __future__ import annotations

import uuid

import pytest

from tests.redis.server import RedisServer
from tests.test_examples import run_example


@pytest.mark.parametrize("servers", ["its-own", "redis"])
def test_celery_reports_dedupes_runs_and_enqueues_and_outlives_a_killed_child(
    servers: str, request: pytest.FixtureRequest
) -> None:
    env: dict[str, str] = {"CELERY_BROKER_URL": "", "TENURE_URL": ""}
    if servers == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        env = {
            "CELERY_BROKER_URL": redis.url(11),
            "TENURE_URL": f"{redis.url(0)}?prefix=celery-example-{uuid.uuid4().hex[:12]}:",
        }
    lines = run_example("celery_reports.py", env)
    assert lines == [
        "worker: ready, 2 prefork children",
        "rebuild_report(7): running, fencing token 1" if servers == "its-own" else lines[1],
        "rebuild_report(7) again while it runs: a duplicate, answered with the running task's"
        " id: True",
        "rebuild_report(8): runs beside it (another key)",
        "send_invoice(42) again: refused at enqueue, naming the queued task: True",
        "send_invoice(42) again once it was sent: a new task: True",
        "the worker child running rebuild_report(7) is killed with SIGKILL, mid-task",
        "its key is free once its session's 2 s window has passed",
        "rebuild_report(7) runs again, in another child, with a greater token: True",
        "worker: stopped (status 0)",
    ]
    assert lines[1].startswith("rebuild_report(7): running, fencing token ")
