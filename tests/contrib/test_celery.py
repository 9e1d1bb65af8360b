"""tenure.contrib.celery's Singleton with real Celery workers, a real Redis broker and a
real ``tenure serve``.

One ``tenure serve``, one Redis database (broker and result backend) and two
workers are shared by the module: a prefork worker (two children) consuming the
queue ``prefork`` and a solo worker consuming ``solo``; a test that kills a worker
starts its own. The tasks (``tests/contrib/celery_app.py``) record their start in
Redis and block on a gate the test opens, so a run is "in progress" for as long as
a test needs; every test opens its gates at its end, whatever happened. The
workers' sessions have a recovery window of 2 s (``celery_app.WINDOW``): a worker
killed with -9 frees its keys about that long after.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import WorkerLostError
from celery.result import AsyncResult

import tenure
import tenure.sync
from tenure.errors import DuplicateTaskError, LostError
from tests.contrib import celery_app
from tests.contrib.celery_app import app
from tests.contrib.celery_processes import PATIENCE, CeleryProcess, celery_processes, until
from tests.redis.server import RedisServer
from tests.server.wire import ServerProcess

NODE = "celery-tests"
#: The Redis database of this module (the shared server's; flushed at the start).
DB = 9


class Env:
    """What the module's tests share: the servers, the workers, a tenure client."""

    def __init__(self, url: str, env: dict[str, str], directory: Path) -> None:
        self.url = url
        self.env = env
        self.directory = directory
        self.client = tenure.sync.connect(url)
        self.redis = celery_app.redis_client()
        self.gates: list[str] = []
        self.prefork: CeleryProcess
        self.solo: CeleryProcess

    def gate(self) -> str:
        """A new gate (opened at the test's end, if the test did not)."""
        name = uuid.uuid4().hex
        self.gates.append(name)
        return name

    def started(self, gate: str) -> dict[str, Any]:
        """What the run behind ``gate`` recorded as it started (waiting for it)."""
        found = self.redis.blpop([f"started:{gate}"], timeout=PATIENCE)
        assert found is not None, f"no run of gate {gate} started within {PATIENCE} s"
        record: dict[str, Any] = json.loads(found[1])
        return record

    def never_started(self, gate: str) -> bool:
        return self.redis.llen(f"started:{gate}") == 0

    def open(self, *gates: str) -> None:
        for gate in gates:
            self.redis.rpush(f"gate:{gate}", 1)

    def holder(self, key: str) -> Any:
        """The owner of the Singleton key ``key`` (None when free)."""
        with self.client.session(NODE) as session:
            return session.mutex(key).describe().owner


@pytest.fixture(scope="module")
def env(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    directory = tmp_path_factory.mktemp("celery")
    broker = redis_server.url(DB)
    with ServerProcess(directory / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        variables = {"CELERY_TEST_BROKER": broker, "TENURE_URL": url, "TENURE_NODE": NODE}
        app.conf.update(broker_url=broker, result_backend=broker)
        tenure.configure(url, node=NODE)  # the producer's default: this process's
        shared = Env(url, variables, directory)
        shared.redis.flushdb()
        shared.client.create_node(NODE)
        try:
            with celery_processes() as started:
                shared.prefork = CeleryProcess.worker(
                    "prefork", "prefork", "prefork", variables, directory
                )
                started.append(shared.prefork)
                shared.solo = CeleryProcess.worker("solo", "solo", "solo", variables, directory)
                started.append(shared.solo)
                shared.prefork.wait_ready()
                shared.solo.wait_ready()
                yield shared
        finally:
            tenure.configure()
            shared.client.close()
            shared.redis.close()
            app.close()


@pytest.fixture
def shared(env: Env) -> Iterator[Env]:
    """The module's Env, its gates opened at the end of the test."""
    yield env
    env.open(*env.gates)
    env.gates.clear()


def run(task: Any, key: str, gate: str, queue: str) -> AsyncResult:
    return task.apply_async((key, gate), queue=queue)


PLACES = [("prefork", "prefork"), ("prefork", "solo"), ("solo", "prefork")]


@pytest.mark.parametrize(("first", "second"), PLACES, ids=["-".join(p) for p in PLACES])
@pytest.mark.parametrize("mode", ["raise", "return", "log"])
def test_a_duplicate_does_what_on_duplicate_says_and_the_key_is_free_after(
    shared: Env, mode: str, first: str, second: str
) -> None:
    task = {"raise": celery_app.hold_raise, "return": celery_app.hold_return}.get(
        mode, celery_app.hold_log
    )
    key, gate, again, later = uuid.uuid4().hex, shared.gate(), shared.gate(), shared.gate()
    running = run(task, key, gate, first)
    record = shared.started(gate)
    assert record["id"] == running.id
    assert shared.holder(task.singleton_key((key, gate), {})).session_id > 0

    duplicate = run(task, key, again, second)  # the same key: another gate, not in unique_on
    if mode == "raise":
        with pytest.raises(DuplicateTaskError) as raised:
            duplicate.get(timeout=PATIENCE)
        assert raised.value.running == running.id
        assert raised.value.task == task.name
        assert duplicate.state == "FAILURE"
    elif mode == "return":
        assert duplicate.get(timeout=PATIENCE) == running.id
    else:
        assert duplicate.get(timeout=PATIENCE) is None
        worker = shared.prefork if second == "prefork" else shared.solo
        worker.wait_log(f"{duplicate.id}]: {task.name} is a duplicate")
        assert f"is held by task {running.id}; not run" in worker.log()
    assert shared.never_started(again), "a duplicate never runs the task"

    shared.open(gate)
    assert running.get(timeout=PATIENCE) == {"lost": False, "token": record["token"]}
    # Released when the task ended: the next run of the key runs, with a greater token.
    following = run(task, key, later, second)
    assert shared.started(later)["token"] > record["token"]
    shared.open(later)
    assert following.get(timeout=PATIENCE)["lost"] is False


def test_different_keys_run_side_by_side_each_child_in_its_own_session(shared: Env) -> None:
    # The worker's main process opened a session before its pool forked the children
    # (celery_app.open_before_the_pool_forks): each child opened its own.
    task = celery_app.hold_raise
    keys, gates = [uuid.uuid4().hex, uuid.uuid4().hex], [shared.gate(), shared.gate()]
    results = [run(task, key, gate, "prefork") for key, gate in zip(keys, gates, strict=True)]
    records = [shared.started(gate) for gate in gates]
    owners = [
        shared.holder(task.singleton_key((key, gate), {}))
        for key, gate in zip(keys, gates, strict=True)
    ]
    assert records[0]["pid"] != records[1]["pid"]
    assert owners[0].session_id != owners[1].session_id
    assert [owner.identity.pid for owner in owners] == [record["pid"] for record in records]
    # The main process's own session is there too, and neither child's.
    main = shared.prefork.proc.pid
    assert main in {live.identity.pid for live in shared.client.list_sessions(NODE)}
    assert all(owner.identity.pid != main for owner in owners)
    shared.open(*gates)
    assert [result.get(timeout=PATIENCE)["lost"] for result in results] == [False, False]


def test_a_prefork_child_killed_mid_task_frees_the_key_within_its_window(shared: Env) -> None:
    task = celery_app.hold_raise
    key, gate, again = uuid.uuid4().hex, shared.gate(), shared.gate()
    name = task.singleton_key((key, gate), {})
    running = run(task, key, gate, "prefork")
    record = shared.started(gate)
    assert shared.holder(name) is not None

    os.kill(record["pid"], signal.SIGKILL)
    killed = time.monotonic()
    with pytest.raises(WorkerLostError):
        running.get(timeout=PATIENCE)
    until(lambda: shared.holder(name) is None, f"{name} freed after the kill")
    freed = time.monotonic() - killed
    # (Not asserted: the window is 2 s, the store's check and a loaded machine add to it.)
    print(f"freed {freed:.2f} s after the kill")

    following = run(task, key, again, "prefork")  # a new child (the pool replaced it)
    assert shared.started(again)["token"] > record["token"]
    shared.open(again)
    assert following.get(timeout=PATIENCE)["lost"] is False


def test_a_task_delivered_again_after_its_child_was_killed_runs_once_its_old_hold_ends(
    shared: Env,
) -> None:
    # acks_late and reject_on_worker_lost: the broker delivers the task again at once,
    # while its old hold (the dead child's session) lives on for its window. The new
    # delivery is no duplicate of anything: it waits for its own old hold to end.
    task = celery_app.hold_late
    key, gate = uuid.uuid4().hex, shared.gate()
    running = run(task, key, gate, "prefork")
    first = shared.started(gate)
    os.kill(first["pid"], signal.SIGKILL)
    second = shared.started(gate)
    assert second["id"] == running.id
    assert second["pid"] != first["pid"]
    assert second["token"] > first["token"]
    shared.open(gate)
    assert running.get(timeout=PATIENCE) == {"lost": False, "token": second["token"]}


def test_a_solo_worker_killed_mid_task_frees_the_key_for_another_worker(
    shared: Env, tmp_path: Path
) -> None:
    task = celery_app.hold_raise
    key, gate, again = uuid.uuid4().hex, shared.gate(), shared.gate()
    name = task.singleton_key((key, gate), {})
    with celery_processes() as started:
        doomed = CeleryProcess.worker("doomed", "solo", "doomed", shared.env, tmp_path)
        started.append(doomed)
        doomed.wait_ready()
        run(task, key, gate, "doomed")
        record = shared.started(gate)
        assert record["pid"] == doomed.proc.pid  # solo: the worker runs it itself

        # Still running there, so a duplicate on the prefork worker is refused...
        with pytest.raises(DuplicateTaskError):
            run(task, key, again, "prefork").get(timeout=PATIENCE)
        doomed.kill()
    until(lambda: shared.holder(name) is None, f"{name} freed after the kill")
    # ... and once the store freed the key, it runs there.
    following = run(task, key, again, "prefork")
    assert shared.started(again)["token"] > record["token"]
    shared.open(again)
    assert following.get(timeout=PATIENCE)["lost"] is False


def test_a_hold_lost_while_the_task_runs_is_logged_and_fails_the_task_at_its_end(
    shared: Env,
) -> None:
    # An operator kills the worker's session (as an expiry past the window would end
    # it): the store frees the key, so a duplicate runs beside the first run, as
    # docs/integrations.md says; the first run is told at once (an error logged) and
    # fails at its end with the loss, or (raise_on_loss=False) returns, knowing.
    for task in (celery_app.hold_raise, celery_app.hold_on_after_loss):
        key, gate, beside = uuid.uuid4().hex, shared.gate(), shared.gate()
        name = task.singleton_key((key, gate), {})
        first = run(task, key, gate, "prefork")
        record = shared.started(gate)
        shared.client.kill_session(NODE, shared.holder(name).session_id)
        shared.prefork.wait_log(f"{first.id}] lost its hold of {name!r}")

        second = run(task, key, beside, "solo")
        assert shared.started(beside)["token"] > record["token"]
        shared.open(gate, beside)
        if task is celery_app.hold_raise:
            with pytest.raises(LostError):
                first.get(timeout=PATIENCE)
        else:
            assert first.get(timeout=PATIENCE) == {"lost": True, "token": record["token"]}
        assert second.get(timeout=PATIENCE)["lost"] is False

    # The child whose session was killed opens a new one for its next task.
    again = [shared.gate(), shared.gate()]
    results = [run(celery_app.hold_raise, uuid.uuid4().hex, gate, "prefork") for gate in again]
    for gate in again:
        shared.started(gate)
    shared.open(*again)
    assert [result.get(timeout=PATIENCE)["lost"] for result in results] == [False, False]


# -- mode="enqueue": the producer claims the key ----------------------------------------


def test_enqueue_mode_refuses_a_second_enqueue_while_the_first_runs(shared: Env) -> None:
    task = celery_app.queued_raise
    key, gate, again = uuid.uuid4().hex, shared.gate(), shared.gate()
    first = run(task, key, gate, "prefork")
    shared.started(gate)
    with pytest.raises(DuplicateTaskError) as raised:
        run(task, key, again, "prefork")
    assert raised.value.running == first.id
    assert raised.value.key == task.singleton_key((key, gate), {}) + "/queued"

    shared.open(gate)
    first.get(timeout=PATIENCE)
    # The worker released the claim by its id as the task ended: enqueued again at once.
    following = run(task, key, again, "prefork")
    shared.started(again)
    shared.open(again)
    assert following.get(timeout=PATIENCE)["lost"] is False


@pytest.mark.parametrize("mode", ["return", "log"])
def test_enqueue_mode_returns_the_queued_task_and_a_revoked_one_frees_the_key(
    shared: Env, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = celery_app.queued_return if mode == "return" else celery_app.queued_log
    key, gate, again = uuid.uuid4().hex, shared.gate(), shared.gate()
    parked = f"parked-{uuid.uuid4().hex}"  # a queue nobody consumes yet
    queued = run(task, key, gate, parked)
    with caplog.at_level(logging.INFO, logger="tenure.contrib.celery"):
        answer = run(task, key, again, parked)
    assert answer.id == queued.id
    level = logging.INFO if mode == "return" else logging.WARNING
    assert [(r.levelno, queued.id in r.getMessage()) for r in caplog.records] == [(level, True)]

    # Revoked before it ran: the worker that receives it discards it, and frees its key.
    app.control.revoke(queued.id)
    answered = app.control.add_consumer(
        parked, destination=["prefork@" + socket.gethostname()], reply=True
    )
    assert answered, "the prefork worker did not answer add_consumer"
    try:
        following = until(
            lambda: _enqueued(task, key, again, "prefork", queued.id),
            "an enqueue after the revoke",
        )
        shared.started(again)
        shared.open(again)
        assert following.get(timeout=PATIENCE)["lost"] is False
        assert shared.never_started(gate)
    finally:
        app.control.cancel_consumer(
            parked, destination=["prefork@" + socket.gethostname()], reply=True
        )


def test_a_lost_enqueued_task_keeps_its_key_no_longer_than_enqueue_at_most(shared: Env) -> None:
    task = celery_app.queued_brief  # enqueue_at_most=2
    key, nowhere = uuid.uuid4().hex, f"nowhere-{uuid.uuid4().hex}"
    run(task, key, shared.gate(), nowhere)
    with pytest.raises(DuplicateTaskError):
        run(task, key, shared.gate(), nowhere)
    # Nobody will ever run it: the claim ends at its at_most, and the key with it.
    until(lambda: _enqueued(task, key, shared.gate(), nowhere), "an enqueue after at_most")


def test_a_retried_task_keeps_its_claim_until_its_last_try_ends(shared: Env) -> None:
    task = celery_app.queued_retry
    key, gate, again = uuid.uuid4().hex, shared.gate(), shared.gate()
    first = run(task, key, gate, "prefork")
    record = shared.started(gate)  # its second try (the first retried at once)
    assert record["id"] == first.id
    with pytest.raises(DuplicateTaskError):
        run(task, key, again, "prefork")
    shared.open(gate)
    assert first.get(timeout=PATIENCE)["lost"] is False
    following = run(task, key, again, "prefork")
    shared.started(again)
    shared.open(again)
    assert following.get(timeout=PATIENCE)["lost"] is False


def _enqueued(
    task: Any, key: str, gate: str, queue: str, queued: str | None = None
) -> AsyncResult | None:
    """The task sent, or None if it was a duplicate (raised, or answered with the result
    of the ``queued`` task)."""
    try:
        sent = run(task, key, gate, queue)
    except DuplicateTaskError:
        return None
    return None if sent.id == queued else sent
