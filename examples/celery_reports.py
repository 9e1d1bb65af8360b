"""Celery tasks that never run twice at once: tenure.contrib.celery's Singleton.

Two tasks of a reporting service, run by a real Celery worker (prefork, two
children) over a Redis broker:

* ``rebuild_report(report_id)`` is a ``Singleton`` keyed by ``report_id``: while
  one rebuild of report 7 runs, a second one is a duplicate, which returns the
  running task's id (``on_duplicate="return"``) instead of rebuilding it again;
  report 8 rebuilds beside it. The worker's child running it is then killed with
  SIGKILL mid-task: no lock is left behind for hours, the key is free once the
  worker's session has passed its 2-second recovery window, and the next rebuild
  runs, with a greater fencing token.
* ``send_invoice(invoice_id)`` has ``mode="enqueue"``: the producer (this program)
  claims the key when it sends the task, so a second ``send_invoice.delay(42)``
  while the first is queued or running is refused at once, with
  ``DuplicateTaskError`` naming the task already queued. The worker releases the
  claim when the task ends, and the invoice can be sent again.

Here a task's "work" lasts until this program says it is done (a Redis list the
task waits on), so that the story can happen while it runs.

Run it with your Redis and tenure server (``pip install 'tenure[celery]'
'celery[redis]'``)::

    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 TENURE_URL=tenure://127.0.0.1:6388 \\
        python examples/celery_reports.py

Without ``CELERY_BROKER_URL`` it starts a throwaway ``redis-server`` (the binary on
PATH), and without ``TENURE_URL`` a throwaway ``tenure serve``, each on a free
loopback port. The worker is this file again: ``celery -A celery_reports worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import redis
from celery import Celery, Task

import tenure
import tenure.sync
from tenure.contrib.celery import Singleton
from tenure.errors import DuplicateTaskError

NODE = "celery-demo"
#: Seconds the store keeps a worker's session once its connection is gone.
WINDOW = 2.0
#: The longest any one step may take, in seconds.
WAIT = 30.0
BROKER = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")

app = Celery("celery_reports", broker=BROKER, backend=BROKER)
app.conf.update(broker_connection_retry_on_startup=True, worker_prefetch_multiplier=1)


class Reporting(Singleton):
    """This service's Singleton tasks: a worker killed with -9 frees its keys in 2 s."""

    recovery_window = WINDOW


@app.task(bind=True, base=Reporting, unique_on=["report_id"], on_duplicate="return")
def rebuild_report(self: Task, report_id: int) -> int:
    """Rebuild report ``report_id``: never two rebuilds of one report at once."""
    return work(self, f"rebuild_report({report_id})")


@app.task(bind=True, base=Reporting, unique_on=["invoice_id"], mode="enqueue", enqueue_at_most=300)
def send_invoice(self: Task, invoice_id: int) -> int:
    """Send invoice ``invoice_id``: never queued twice, let alone sent twice."""
    return work(self, f"send_invoice({invoice_id})")


def work(task: Task, what: str) -> int:
    """Say it started (pid and token), then work until the demo says done; the token."""
    lock: tenure.sync.Lock | None = task.singleton_lock
    assert lock is not None  # (a Singleton's run holds its key)
    with redis.Redis.from_url(app.conf.broker_url, socket_timeout=WAIT + 5) as connection:
        connection.rpush(f"started:{what}", json.dumps({"pid": os.getpid(), "token": lock.token}))
        connection.blpop([f"done:{what}"], timeout=WAIT)
    return lock.token


# -- the demo: a producer and a worker ---------------------------------------------------


class Demo:
    """This program's view: it sends the tasks, and tells their work when to end."""

    def __init__(self) -> None:
        self.redis = redis.Redis.from_url(app.conf.broker_url, socket_timeout=WAIT + 5)

    def started(self, what: str) -> dict[str, Any]:
        found = self.redis.blpop([f"started:{what}"], timeout=WAIT)
        if found is None:
            raise SystemExit(f"{what} did not start within {WAIT} s")
        record: dict[str, Any] = json.loads(found[1])
        return record

    def done(self, what: str) -> None:
        self.redis.rpush(f"done:{what}", 1)

    def story(self, worker: subprocess.Popen[bytes]) -> None:
        first = rebuild_report.delay(7)
        running = self.started("rebuild_report(7)")
        print(f"rebuild_report(7): running, fencing token {running['token']}")
        again = rebuild_report.delay(7)
        print(
            "rebuild_report(7) again while it runs: a duplicate, answered with the running"
            f" task's id: {again.get(timeout=WAIT) == first.id}"
        )
        beside = rebuild_report.delay(8)
        self.started("rebuild_report(8)")
        print("rebuild_report(8): runs beside it (another key)")
        self.done("rebuild_report(8)")
        beside.get(timeout=WAIT)

        invoice = send_invoice.delay(42)
        try:
            send_invoice.delay(42)
        except DuplicateTaskError as error:
            named = error.running == invoice.id
            print(f"send_invoice(42) again: refused at enqueue, naming the queued task: {named}")
        self.started("send_invoice(42)")
        self.done("send_invoice(42)")
        invoice.get(timeout=WAIT)
        resent = send_invoice.delay(42)
        self.started("send_invoice(42)")
        self.done("send_invoice(42)")
        print(f"send_invoice(42) again once it was sent: a new task: {resent.id != invoice.id}")
        resent.get(timeout=WAIT)

        os.kill(running["pid"], signal.SIGKILL)
        print("the worker child running rebuild_report(7) is killed with SIGKILL, mid-task")
        with contextlib.suppress(Exception):  # (WorkerLostError: its child died)
            first.get(timeout=WAIT)
        self.until_free(rebuild_report.singleton_key((7,), {}))
        print(f"its key is free once its session's {WINDOW:g} s window has passed")
        after = rebuild_report.delay(7)
        record = self.started("rebuild_report(7)")
        self.done("rebuild_report(7)")
        after.get(timeout=WAIT)
        print(
            "rebuild_report(7) runs again, in another child, with a greater token:"
            f" {record['token'] > running['token'] and record['pid'] != running['pid']}"
        )
        if worker.poll() is not None:
            raise SystemExit("the worker died with its child")

    def until_free(self, key: str) -> None:
        """Until nobody holds the Singleton key ``key`` (bounded by WAIT)."""
        deadline = time.monotonic() + WAIT
        with tenure.sync.default_client().session(NODE) as session:
            while session.mutex(key).describe().held:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{key} was not freed within {WAIT} s")
                time.sleep(0.1)


def demo(broker: str, url: str, scratch: Path) -> None:
    app.conf.update(broker_url=broker, result_backend=broker)
    tenure.configure(url, node=NODE)
    tenure.sync.default_client().create_node(NODE, exist_ok=True)
    env = {**os.environ, "CELERY_BROKER_URL": broker, "TENURE_URL": url, "TENURE_NODE": NODE}
    argv = [sys.executable, "-m", "celery", "-A", "celery_reports", "worker", "--pool", "prefork"]
    argv += ["--concurrency", "2", "--loglevel", "INFO", "--logfile", str(scratch / "worker.log")]
    argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    with (scratch / "worker.out").open("wb") as out:
        worker = subprocess.Popen(
            argv,
            cwd=Path(__file__).parent,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + WAIT
            while not app.control.ping(timeout=0.5):
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the worker did not start: see {scratch}")
            print("worker: ready, 2 prefork children")
            Demo().story(worker)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGTERM)  # a warm shutdown
            try:
                worker.wait(WAIT)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait(WAIT)
            tenure.configure()
            app.close()
    print(f"worker: stopped (status {worker.returncode})")


# -- throwaway servers, when none is given ------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def throwaway(argv: list[str], port: int, what: str) -> Iterator[None]:
    """Run ``argv`` until the block ends, once ``port`` accepts connections."""
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{what} did not start (exit status {process.poll()})")
            time.sleep(0.05)
        yield
    finally:
        process.kill()
        process.wait(WAIT)


def run() -> None:
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        broker = os.environ.get("CELERY_BROKER_URL")
        if not broker:
            binary = shutil.which("redis-server")
            if binary is None:
                raise SystemExit(
                    "set CELERY_BROKER_URL=redis://HOST:PORT/DB, or install redis-server"
                )
            port = free_port()
            argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
            stack.enter_context(throwaway(argv, port, "redis-server"))
            broker = f"redis://127.0.0.1:{port}/0"
        url = os.environ.get("TENURE_URL")
        if not url:
            port = free_port()
            argv = [sys.executable, "-m", "tenure", "serve", "--port", str(port)]
            argv += ["--data-dir", str(scratch / "data")]
            stack.enter_context(throwaway(argv, port, "tenure serve"))
            url = f"tenure://127.0.0.1:{port}"
        demo(broker, url, scratch)


async def main() -> None:
    await asyncio.to_thread(run)


if __name__ == "__main__":
    asyncio.run(main())
