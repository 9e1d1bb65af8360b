"""The Celery app of ``tests/contrib/test_celery*.py``: tasks that say when they start and
wait on a gate the test opens.

Imported by the test (the producer) and by the real ``celery worker`` and ``celery
beat`` processes it starts (``-A tests.contrib.celery_app``), all configured from
the environment: ``CELERY_TEST_BROKER`` (a Redis database, also the result
backend), ``TENURE_URL`` and ``TENURE_NODE``.

A holding task records ``{"id", "pid", "token"}`` in the Redis list
``started:GATE`` as it starts (the pid is the process that runs it, a prefork
child's or the solo worker's), then blocks until the test pushes to ``gate:GATE``.
A duplicate never runs the body, so it never records anything.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final

import redis
from celery import Celery, Task, signals

from tenure.contrib.celery import LeaderScheduler, Singleton, process_session

#: The broker and result backend (the tests set it; a dead port otherwise).
BROKER: Final = os.environ.get("CELERY_TEST_BROKER", "redis://127.0.0.1:9/0")
#: The longest a task waits for its gate, in seconds.
GATE_WAIT: Final = 60
#: The recovery window of the tests' worker sessions, in seconds: a killed worker's
#: keys are free this long after.
WINDOW: Final = 2.0
#: How often beat sends the ``tick`` task, in seconds.
TICK_EVERY: Final = 0.3

app = Celery("tenure_tests", broker=BROKER, backend=BROKER)
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_default_queue="prefork",
    result_extended=True,
    worker_prefetch_multiplier=1,
    beat_scheduler=f"{LeaderScheduler.__module__}:{LeaderScheduler.__name__}",
    beat_schedule={
        "tick": {"task": "tick", "schedule": TICK_EVERY, "options": {"queue": "beat"}},
    },
    beat_max_loop_interval=1,
    tenure_beat_election="test-beat",
    tenure_beat_recovery_window=WINDOW,
)


class Brief(Singleton):
    """The tests' Singleton: keyed by ``key`` alone, a worker's window of WINDOW seconds."""

    unique_on = ("key",)
    recovery_window = WINDOW


def redis_client() -> redis.Redis:
    """A client of the tests' Redis database (the app's broker)."""
    return redis.Redis.from_url(app.conf.broker_url, socket_timeout=GATE_WAIT + 10)


@signals.worker_init.connect
def open_before_the_pool_forks(**_: object) -> None:
    """Open a default client and a session in the worker's main process before its
    prefork pool forks the children: each child must open its own."""
    process_session(WINDOW)


def hold(task: Task, gate: str) -> dict[str, Any]:
    """Say so in ``started:GATE``, then wait for ``gate:GATE``; what the run saw."""
    lock = task.singleton_lock
    record = {"id": task.request.id, "pid": os.getpid(), "token": lock and lock.token}
    with redis_client() as connection:
        connection.rpush(f"started:{gate}", json.dumps(record))
        if connection.blpop([f"gate:{gate}"], timeout=GATE_WAIT) is None:
            raise TimeoutError(f"gate {gate} was not opened within {GATE_WAIT} s")
    return {"lost": lock is not None and lock.lost.is_set(), "token": lock and lock.token}


@app.task(bind=True, base=Brief, name="hold_raise", on_duplicate="raise")
def hold_raise(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="hold_return", on_duplicate="return")
def hold_return(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="hold_log", on_duplicate="log")
def hold_log(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="hold_on_after_loss", raise_on_loss=False)
def hold_on_after_loss(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="hold_late", acks_late=True, reject_on_worker_lost=True)
def hold_late(self: Task, key: str, gate: str) -> dict[str, Any]:
    """Acknowledged at its end: a run whose worker dies is delivered again."""
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="queued_raise", mode="enqueue", enqueue_at_most=60)
def queued_raise(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="queued_return", mode="enqueue", on_duplicate="return")
def queued_return(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="queued_log", mode="enqueue", on_duplicate="log")
def queued_log(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="queued_brief", mode="enqueue", enqueue_at_most=WINDOW)
def queued_brief(self: Task, key: str, gate: str) -> dict[str, Any]:
    return hold(self, gate)


@app.task(bind=True, base=Brief, name="queued_retry", mode="enqueue", enqueue_at_most=60)
def queued_retry(self: Task, key: str, gate: str) -> dict[str, Any]:
    """Retried once at once, then holds: the retried message keeps the claim."""
    if self.request.retries == 0:
        raise self.retry(countdown=0)
    return hold(self, gate)


@app.task(name="tick")
def tick() -> None:
    """What beat sends (nobody consumes the ``beat`` queue: the messages are the record)."""
