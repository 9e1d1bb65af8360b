"""tenure.contrib.celery in one process: keys, declarations, duplicates on ``memory://``.

The unit tier's half of the Celery tests (no process is started): the key a call
makes, the settings refused where a task is declared, the error and its trip
through a result backend, and each ``on_duplicate`` in both modes, with the task
run in this thread (``task.apply``: what a worker runs) and sent to kombu's
in-memory broker (``apply_async``: what a producer does), over the default client
on ``memory://``. The real workers, broker and server are ``test_celery.py``'s.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import logging
import pickle
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery, Task

import tenure
import tenure.sync
from tenure.contrib.celery import HEADER, Singleton
from tenure.errors import DuplicateTaskError, InvalidArgumentError, SessionExpiredError
from tests.contrib.celery_processes import until

NODE = "celery-units"


@pytest.fixture
def app() -> Iterator[Celery]:
    """An app on kombu's in-memory broker, and the default backend ``memory://``."""
    made = Celery(f"units-{uuid.uuid4().hex}", broker="memory://", backend="cache+memory://")
    made.conf.task_store_eager_result = True
    tenure.configure("memory://", node=NODE)
    tenure.sync.default_client().create_node(NODE)
    try:
        yield made
    finally:
        tenure.configure()  # (closes the default client, and the sessions with it)
        made.close()


def declare(app: Celery, **settings: Any) -> Any:
    """A Singleton task ``report(report_id, force=False, when=None)`` with ``settings``."""

    settings.setdefault("name", f"report-{uuid.uuid4().hex}")

    @app.task(bind=True, base=Singleton, **settings)
    def report(self: Task, report_id: int, force: bool = False, when: Any = None) -> Any:
        lock = self.singleton_lock
        return {"token": lock.token, "held": not lock.lost.is_set()} if lock else None

    return report


# -- keys ------------------------------------------------------------------------------


def test_a_key_is_the_task_and_its_bound_arguments(app: Celery) -> None:
    every = declare(app)
    assert every.singleton_key((7,), {}) == every.singleton_key((), {"report_id": 7})
    assert every.singleton_key((7,), {}) == every.singleton_key((7, False), {})
    assert every.singleton_key((7,), {}) != every.singleton_key((7, True), {})
    assert every.singleton_key((7,), {}) != every.singleton_key((8,), {})
    assert every.singleton_key((7,), {}).startswith(f"celery/{every.name}/")

    chosen = declare(app, unique_on="report_id")
    assert chosen.singleton_key((7, True), {}) == chosen.singleton_key((7,), {"force": False})
    assert chosen.singleton_key((7,), {}) != chosen.singleton_key((8,), {})
    # Another task with the same arguments has another key.
    assert chosen.singleton_key((7,), {}) != declare(app, unique_on="report_id").singleton_key(
        (7,), {}
    )
    assert declare(app, unique_on=[], name="whole").singleton_key((1,), {}) == "celery/whole"


def test_a_key_of_json_types_is_the_same_in_every_process(app: Celery) -> None:
    task = declare(app, unique_on=["report_id", "when"], key_prefix="jobs/")
    when = datetime.datetime(2026, 1, 7, 3, 0, tzinfo=datetime.UTC)
    key = task.singleton_key((7,), {"when": when})
    assert key == task.singleton_key(
        (7,), {"when": datetime.datetime(2026, 1, 7, 3, 0, tzinfo=datetime.UTC)}
    )
    assert key.startswith(f"jobs/{task.name}/")
    assert len(key.rsplit("/", 1)[1]) == 32


def test_a_key_refuses_what_json_cannot_hold_and_calls_that_do_not_fit(app: Celery) -> None:
    task = declare(app)
    with pytest.raises(InvalidArgumentError, match=r"argument 'when' of task .* cannot key it"):
        task.singleton_key((7,), {"when": object()})
    with pytest.raises(InvalidArgumentError, match="the arguments do not fit task"):
        task.singleton_key((), {"nothing": 1})
    with pytest.raises(InvalidArgumentError, match=r"names \['self'\], which a call does not"):
        declare(app, unique_on="self").singleton_key((7,), {})
    # An argument unique_on leaves out may be anything.
    assert declare(app, unique_on="report_id").singleton_key((7,), {"when": object()})


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"unique_on": ["reportid"]}, r"names \['reportid'\], which are not parameters"),
        ({"unique_on": 7}, "unique_on of task .* must be None, a parameter name"),
        ({"unique_on": [""]}, "must name parameters"),
        (
            {"on_duplicate": "ignore"},
            "on_duplicate of task .* must be one of 'raise', 'return', 'log'",
        ),
        ({"mode": "queued"}, "mode of task .* must be one of 'run', 'enqueue'"),
        ({"recovery_window": 0}, "recovery_window of task .* must be None or positive"),
        ({"recovery_window": float("nan")}, "recovery_window"),
        ({"enqueue_at_most": 0}, "enqueue_at_most of task .* must be positive"),
        ({"enqueue_at_most": 400 * 86400.0}, "MAX_CLAIM_SECONDS"),
        ({"key_prefix": None}, "key_prefix"),
    ],
)
def test_bad_settings_are_refused_where_the_task_is_declared(
    app: Celery, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        assert declare(app, **settings).name  # (app.task makes the class on first use)


def test_the_duplicate_error_names_the_running_task_and_travels_whole(app: Celery) -> None:
    error = DuplicateTaskError("report", "celery/report/ab", "id-1")
    assert str(error) == "report is a duplicate: 'celery/report/ab' is held by task id-1"
    assert (
        str(DuplicateTaskError("report", "k"))
        == "report is a duplicate: 'k' is held by another task"
    )
    copied = pickle.loads(pickle.dumps(error))
    assert (copied.task, copied.key, copied.running) == ("report", "celery/report/ab", "id-1")
    # As a JSON result backend stores and rebuilds it (the caller's AsyncResult.get()).
    stored = app.backend.prepare_exception(error, serializer="json")
    rebuilt = app.backend.exception_to_python(stored)
    assert type(rebuilt) is DuplicateTaskError
    assert (rebuilt.task, rebuilt.key, rebuilt.running) == ("report", "celery/report/ab", "id-1")


# -- duplicates, run in this thread ---------------------------------------------------


def hold_key(name: str, task_id: str) -> tenure.sync.Lock:
    """Hold ``name`` as a Singleton run of ``task_id`` would, from another session."""
    session = tenure.sync.default_client().session(NODE)
    lock = session.mutex(name).try_lock(data=f'{{"task_id": "{task_id}"}}'.encode())
    assert lock is not None
    return lock


@pytest.mark.parametrize("on_duplicate", ["raise", "return", "log"])
def test_a_run_whose_key_is_held_does_what_on_duplicate_says(
    app: Celery, on_duplicate: str, caplog: pytest.LogCaptureFixture
) -> None:
    task = declare(app, unique_on="report_id", on_duplicate=on_duplicate)
    alone = task.apply((7,)).get()
    assert alone["held"] is True
    assert task.apply((7,)).get()["token"] > alone["token"]  # released at the end

    held = hold_key(task.singleton_key((7,), {}), "the-first")
    with caplog.at_level(logging.INFO, logger="tenure.contrib.celery"):
        result = task.apply((7,), task_id="the-second")
    if on_duplicate == "raise":
        assert result.state == "FAILURE"
        assert isinstance(result.result, DuplicateTaskError)
        assert result.result.running == "the-first"
    else:
        assert result.get() == ("the-first" if on_duplicate == "return" else None)
        (record,) = caplog.records
        assert record.levelno == (logging.INFO if on_duplicate == "return" else logging.WARNING)
        assert "the-second" in record.getMessage()
        assert "the-first" in record.getMessage()
    assert task.apply((8,)).get()["held"] is True  # another key runs
    held.release()
    assert task.apply((7,)).get()["held"] is True


def test_threads_of_one_process_share_its_session_and_a_held_key_is_a_duplicate(
    app: Celery,
) -> None:
    # As a threads pool runs tasks: one session per process, a run per thread.
    holding, finish = threading.Event(), threading.Event()

    @app.task(bind=True, base=Singleton, name="threaded", unique_on=[])
    def threaded(self: Task, wait: bool) -> int:
        if wait:
            holding.set()
            finish.wait(10)
        return int(self.singleton_lock.session.id)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        first = pool.submit(lambda: threaded.apply((True,), task_id="in-a-thread"))
        assert holding.wait(10)
        duplicate = threaded.apply((False,), task_id="in-another")
        finish.set()
        session_id = first.result(10).get()
    assert isinstance(duplicate.result, DuplicateTaskError)
    assert duplicate.result.running == "in-a-thread"
    assert threaded.apply((False,)).get() == session_id


def test_a_hold_lost_while_the_task_runs_fails_it_at_its_end(
    app: Celery, caplog: pytest.LogCaptureFixture
) -> None:
    client = tenure.sync.default_client()

    @app.task(bind=True, base=Singleton, name="loses")
    def loses(self: Task) -> bool:
        lock = self.singleton_lock
        client.kill_session(NODE, lock.session.id)  # as an operator would
        return bool(lock.lost.wait(5))

    result = loses.apply()
    assert result.state == "FAILURE"
    assert isinstance(result.result, SessionExpiredError)
    # (Logged on the client's thread as the loss is delivered, by now or a moment after.)
    until(
        lambda: any("lost its hold of 'celery/loses/" in r.getMessage() for r in caplog.records),
        "the loss logged",
    )
    # The process's next run opens a new session.
    assert declare(app).apply((1,)).get()["held"] is True


# -- mode="enqueue", sent to the in-memory broker --------------------------------------


@pytest.mark.parametrize("on_duplicate", ["raise", "return", "log"])
def test_an_enqueue_while_one_is_queued_does_what_on_duplicate_says(
    app: Celery, on_duplicate: str
) -> None:
    task = declare(app, mode="enqueue", unique_on="report_id", on_duplicate=on_duplicate)
    queued = task.apply_async((7,), task_id="queued-one")
    if on_duplicate == "raise":
        with pytest.raises(DuplicateTaskError) as raised:
            task.delay(7)
        assert raised.value.running == "queued-one"
        assert raised.value.key == task.singleton_key((7,), {}) + "/queued"
    else:
        assert task.delay(7).id == queued.id
    assert task.delay(8).id != queued.id  # another key is sent

    # The worker runs it (here: apply, with the message's headers) and releases the claim.
    (claim,) = [queued_headers(app, queued.id)[HEADER]]
    assert set(claim) == {"node", "name", "id"}
    assert task.apply((7,), task_id=queued.id, headers={HEADER: claim}).get()["held"] is True
    assert task.delay(7).id != queued.id


def queued_headers(app: Celery, task_id: str) -> dict[str, Any]:
    """The headers of the message of ``task_id`` waiting in the in-memory broker."""
    with app.connection_for_read() as connection:
        queue = connection.SimpleQueue("celery")
        try:
            while True:
                message = queue.get(timeout=1)
                message.ack()
                if message.headers["id"] == task_id:
                    return dict(message.headers)
        finally:
            queue.close()
