"""docs/recipes.md's context: its fragments are the body of a program that has a
client ``client`` of ``url`` and a session ``session`` of the node ``app`` (the
leader runner's own example makes them so); on ``memory://``, in process."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import tenure
from tenure.fencing import FileFence
from tests.docs.context import Hook, Page, Run, async_reader, calls_of, reader, until

SETUP = """
url = "memory://docs-recipes"
client = await tenure.connect(url)
await client.create_node("app")
session = await client.session("app")
"""

IMPORTS = """
import asyncio
import contextlib
from collections.abc import AsyncIterator

import tenure
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from fastapi import FastAPI
"""


def readers(where: Path) -> dict[str, object]:
    """What the page leaves to the reader."""
    return {
        "serve": reader("serve"),
        "rebuild": reader("rebuild"),
        "transfer": reader("transfer"),  # the all-or-none example's, of two tokens
        "move": reader("move"),
        "keys": [f"order-{n}" for n in range(20)],
        "write": reader("write"),
        "credit": async_reader("credit"),
        "run_the_schedule": async_reader("run_the_schedule"),
        "report": reader("report", called=False),  # a job handed to a scheduler
        "job": async_reader("job"),
        "reconfigure": reader("reconfigure"),
        "run_report": async_reader("run_report"),
        "queue": asyncio.Queue(),
        "fence": FileFence(where / "results.json"),
        "run": reader("run", b"done"),
        "export": async_reader("export"),
    }


async def other_parties(step: Run, parties: int, act: str) -> None:
    """``parties`` sessions of another client of the page's store, each doing ``act``."""
    async with tenure.connect(step.ns["url"]) as client:
        sessions = [await client.session("app") for _ in range(parties)]
        namespace: dict[str, Any] = {"sessions": sessions}
        exec(f"async def act(session):\n    {act}", namespace)
        await asyncio.gather(*(namespace["act"](session) for session in sessions))


async def two_more_count_down(step: Run) -> None:
    await until(lambda: step.ns.get("latch"), "the latch is made")
    latch = step.ns["latch"]
    await until(lambda: _remaining_is(latch, 2), "the block counted down once")
    await other_parties(step, 2, 'await session.latch("warmup", count=3).count_down()')


async def _remaining_is(latch: object, left: int) -> bool:
    return await latch.remaining() == left  # type: ignore[attr-defined, no-any-return]


async def three_more_arrive(step: Run) -> None:
    await other_parties(step, 3, 'await session.barrier("stage-2", parties=4).wait(timeout=60)')


async def transfer_both_ways(step: Run) -> None:
    session = step.ns["session"]
    await step.ns["transfer"](session, "acct/1", "acct/7")
    assert calls_of("move")[-1][0] == ("acct/1", "acct/7")


async def nest(step: Run) -> None:
    await step.ns["transfer"](step.ns["session"])
    [(token,)] = {args for args, _ in calls_of("write")}
    assert isinstance(token, int)


async def leads(step: Run) -> None:
    await until(lambda: calls_of("run_the_schedule"), "work runs: the runner leads")


async def lifespan_runs_the_job(step: Run) -> None:
    async with step.ns["lifespan"](step.ns["FastAPI"]()):
        await until(lambda: calls_of("job"), "the background job runs on the leader")
    election = step.ns["session"].election("background-job")
    assert await election.leader() is None  # the lifespan's end resigned


async def a_term_runs_the_scheduler(step: Run) -> None:
    async with tenure.connect(step.ns["url"]) as client:
        runner = asyncio.create_task(client.lead("app", "scheduler-3", step.ns["work"]))
        election = step.ns["session"].election("scheduler-3")
        await until(election.leader, "a term of the scheduler")
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        assert await election.leader() is None


async def a_config_changes(step: Run) -> None:
    # Changed again and again: the block's changes() tells those after its call.
    async with tenure.connect(step.ns["url"]) as client, client.session("app") as other:
        db = other.semaphore("config/db")
        await db.create(limit=1, data=b"host=a", exist_ok=True)

        hosts = itertools.cycle([b"host=b", b"host=a"])

        async def told() -> bool:
            await db.update(next(hosts))
            await asyncio.sleep(0.05)
            return bool(calls_of("reconfigure"))

        await until(told, "the cache tells the change")
    assert calls_of("reconfigure")[0][0][0] == "config/db"


async def the_mutex_excludes_the_librarys(step: Run) -> None:
    mine = step.ns["MyMutex"](step.ns["session"], "ledger")
    async with mine.lock() as lock:
        assert isinstance(lock, tenure.Lock)
        assert (await mine.describe()).held
        async with tenure.connect(step.ns["url"]) as client, client.session("app") as other:
            assert await other.mutex("ledger").try_lock() is None  # one semaphore
    assert not (await mine.describe()).held


async def the_worker_adopted(step: Run) -> None:
    assert step.ns["fence"].read() == b"done"
    assert not step.ns["lease"].held  # the producer's lease ended with the hand-off


async def a_worker(step: Run) -> None:
    """The worker's own client and session: "in another process"."""
    client = await tenure.connect(step.ns["url"])
    step.ns["worker"] = await client.session("app")


PAGE = Page(
    imports=IMPORTS,
    setup=SETUP,
    readers=readers,
    story=False,
    hooks={
        'session.latch("warmup"': Hook(beside=two_more_count_down),
        'session.barrier("stage-2"': Hook(beside=three_more_arrive),
        "async def transfer(session, src, dst):": Hook(then=transfer_both_ways),
        "async def debit(s):": Hook(then=nest),
        "await run_the_schedule(": Hook(forever=True, beside=leads),
        "async def lifespan(": Hook(then=lifespan_runs_the_job),
        "scheduler = AsyncIOScheduler()": Hook(then=a_term_runs_the_scheduler),
        'client.cache("app", prefix="config/")': Hook(forever=True, beside=a_config_changes),
        "class MyMutex:": Hook(then=the_mutex_excludes_the_librarys),
        "await lease.handoff()": Hook(before=a_worker, then=the_worker_adopted, gives=("worker",)),
    },
)
