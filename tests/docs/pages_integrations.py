"""docs/integrations.md's context: the servers it names (``coord-1:6388``,
``coord-2:6388``, ``127.0.0.1:6388``, ``10.0.0.5:6388``) are the members of one
cluster, and the node ``billing`` its Celery section's shell block made is there.
Each block runs in a namespace of its own, in one process (what one block configures
for the process, the next finds, as in one application)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tenure.errors import NotFoundError
from tests.docs.context import Hook, Page, Run, async_reader, calls_of, reader, until
from tests.gunicorn_conf import workers_up, write_config
from tests.ports import free_port

SETUP = """
async with tenure.connect("tenure://coord-1:6388,coord-2:6388") as admin:
    await admin.create_node("billing", exist_ok=True)  # tenure node create billing
    await admin.create_node("web", exist_ok=True)  # tenure node create web
url = "tenure://coord-1:6388,coord-2:6388"
"""

IMPORTS = """
import asyncio
import contextlib
from collections.abc import AsyncIterator

import tenure
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from celery import Celery
from fastapi import FastAPI
from tenure.contrib.celery import Singleton
"""


@dataclass(frozen=True)
class Report:
    """The reader's report (``report.id`` names its lock)."""

    id: int


class Storage:
    """The reader's storage: ``save`` records its calls."""

    save = async_reader("storage.save")


def readers(where: Path) -> dict[str, object]:
    """What the page leaves to the reader."""
    return {
        "Report": Report,
        "storage": Storage(),
        "lines_of": reader("lines_of", [1, 2]),
        "charge": reader("charge"),
        "write_volume_metadata": reader("write_volume_metadata"),
        "app": None,  # each block that uses it is given its kind of app (Celery, Flask)
        "parts": reader("parts", ["header", "body"]),
        "write": reader("write"),
        "report": reader("report", called=False),  # jobs handed to a scheduler
        "cleanup": reader("cleanup", called=False),
        "refresh_the_cache": async_reader("refresh_the_cache"),
    }


async def builds_a_report(step: Run) -> None:
    await step.ns["main"]()
    [(args, kwargs)] = calls_of("storage.save")
    assert args == (Report(7),)
    assert isinstance(kwargs["fencing_token"], int)


async def bills(step: Run) -> None:
    await asyncio.to_thread(step.ns["bill"], 7)
    assert [args for args, _ in calls_of("charge")] == [(1,), (2,)]


async def a_celery_app(step: Run) -> None:
    step.ns["app"] = step.ns["Celery"]("proj", broker="memory://", set_as_current=False)
    step.ns["app"].conf.task_always_eager = True


async def rebuilds_once(step: Run) -> None:
    step.ns["rebuild_report"].apply(args=(7,)).get()
    assert [args[0] for args, _ in calls_of("write")] == ["header", "body"]


async def a_flask_app(step: Run) -> None:
    from flask import Flask

    step.ns["app"] = Flask("docs")


async def the_limit_is_shared(step: Run) -> None:
    app, limiter = step.ns["app"], step.ns["limiter"]

    def ping() -> str:
        return "pong"

    app.add_url_rule("/ping", view_func=limiter.limit("2/minute")(ping))

    client = app.test_client()
    codes = [client.get("/ping").status_code for _ in range(3)]
    assert codes == [200, 200, 429]


async def gunicorn_serves_it(step: Run) -> None:
    """Runs the block as its first line says: gunicorn --preload --workers 4 app:app
    (bound to a free loopback port), and asks a worker to bill."""
    (step.where / "app.py").write_text(step.text)
    # gunicorn reads ./gunicorn.conf.py by itself, so the command stays the block's.
    ready = step.where / "workers-ready"
    write_config(step.where / "gunicorn.conf.py", ready)
    port = free_port()
    gunicorn = Path(sys.executable).with_name("gunicorn")
    args = ["--preload", "--workers", "4", "--bind", f"127.0.0.1:{port}", "app:app"]
    server = await asyncio.create_subprocess_exec(
        gunicorn, *args, cwd=step.where, stdin=subprocess.DEVNULL
    )
    try:

        def ask() -> bytes | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/?7", timeout=5) as answer:
                    return bytes(answer.read())
            except OSError:
                return None

        answer = await until(lambda: asyncio.to_thread(ask), "a gunicorn worker answers")
        assert answer == b"billed\n"
        await until(lambda: len(workers_up(ready)) >= 4, "the 4 gunicorn workers are up")
    finally:
        server.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(server.wait(), 30) == 0


async def a_term_starts_the_scheduler(step: Run) -> None:
    # The block leads until cancelled: its election shows host-a leading meanwhile.
    async def host_a_leads() -> bool:
        async with step.ns["tenure"].connect(step.ns["url"]) as client:
            try:
                session = await client.session("app")
            except NotFoundError:
                return False  # (the block, run beside, has not made its node yet)
            leader = await session.election("scheduler").leader()
            await session.close()
            return leader is not None and leader.data == b"host-a"

    await until(host_a_leads, "host-a leads the election scheduler")


async def the_lifespan_runs_the_job(step: Run) -> None:
    app = step.ns["app"]
    async with app.router.lifespan_context(app):
        await until(lambda: calls_of("refresh_the_cache"), "the job runs on the leader")


async def an_acquire_is_timed(step: Run) -> None:
    tenure = step.ns["tenure"]
    async with tenure.connect("memory://") as client:
        await client.create_node("app")
        async with client.session("app") as session, session.mutex("job"):
            pass
    assert "job granted after" in step.printed.getvalue()


async def tooz_stops(step: Run) -> None:
    coordinator = step.ns["coord"]
    assert coordinator.get_members(b"volumes").get() == {b"volume-host-1"}
    coordinator.stop()


PAGE = Page(
    servers=("cluster",),
    addresses={
        "coord-1:6388,coord-2:6388": "{cluster0},{cluster1}",
        "coord-1:6388": "{cluster0}",
        "127.0.0.1:6388": "{cluster0}",
        "10.0.0.5:6388": "{cluster0}",
    },
    imports=IMPORTS,
    setup=SETUP,
    readers=readers,
    hooks={
        'tenure.locked("report-{report.id}"': Hook(then=builds_a_report),
        '@tenure.sync.locked("invoice-{number}")\ndef bill(number: int) -> None:\n    lock': Hook(
            then=bills
        ),
        "app.py, run as: gunicorn": Hook(then=gunicorn_serves_it),
        'unique_on=["report_id"]': Hook(before=a_celery_app, then=rebuilds_once),
        'unique_on=["invoice_id"]': Hook(before=a_celery_app),
        'scheduler.add_job(report, "cron"': Hook(forever=True, beside=a_term_starts_the_scheduler),
        "app = FastAPI(lifespan=lifespan)": Hook(then=the_lifespan_runs_the_job),
        "class Timing:": Hook(then=an_acquire_is_timed),
        "coordination.get_coordinator(": Hook(then=tooz_stops),
        "from flask_limiter import Limiter": Hook(before=a_flask_app, then=the_limit_is_shared),
    },
)
