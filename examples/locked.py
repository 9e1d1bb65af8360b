"""Run a function holding a lock named from its arguments: ``@tenure.locked``.

A report service builds reports. ``build(report)`` must never run twice at once for
one report, on any replica: it is decorated with ``@tenure.locked("report-{report.id}")``,
so each call holds the mutex of its report (two builds of report 7 take turns, a
build of report 8 runs alongside), and writes with its fencing token
(``tenure.current_lock().token``) to a store that refuses stale tokens. The client and
node come from the process's default (``tenure.configure``, or ``TENURE_URL`` and
``TENURE_NODE``), and every call holds its lock in one default session. Then:
``blocking=False`` skips a nightly job already running elsewhere (the call returns
None), ``timeout=`` gives up on a busy ledger (TimeoutError), a template field that
cannot be read is refused before anything is sent, and an operator who kills the
session cancels the function running in it (SessionExpiredError); the next call
opens a new default session.

    python examples/locked.py
    TENURE_URL=tenure://127.0.0.1:6388 python examples/locked.py
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import tenure
from tenure.errors import InvalidArgumentError, SessionExpiredError

NODE = "locked-demo"


@dataclass
class Report:
    id: int
    title: str


class Store:
    """A store that refuses a write with an older token than it has seen (a fence)."""

    def __init__(self) -> None:
        self.highest: dict[int, int] = {}

    def write(self, report: Report, token: int) -> None:
        if token < self.highest.get(report.id, 0):
            raise RuntimeError(f"stale token {token} for report {report.id}")
        self.highest[report.id] = token


store = Store()
turn = {"a": asyncio.Event(), "c": asyncio.Event()}


@tenure.locked("report-{report.id}")
async def build(report: Report, builder: str) -> int:
    """Build ``report``: one build per report at a time, across every replica."""
    token = tenure.current_lock().token
    print(f"{builder}: building report {report.id} ({report.title}), token {token}")
    if builder == "builder-a":
        turn["a"].set()
        await turn["c"].wait()  # (holds report 7 until builder-c is done with report 8)
    store.write(report, token)
    return token


@tenure.locked("nightly-digest", blocking=False)
async def nightly_digest(replica: str, running: asyncio.Event, finish: asyncio.Event) -> str:
    running.set()
    await finish.wait()
    return f"{replica}: sent the nightly digest"


@tenure.locked("ledger", timeout=0.2)
async def post_to_ledger() -> None:
    print("ledger: posted")


@tenure.locked("export-{name}")
async def export(name: str, started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()  # a long export, until its lock is lost


async def demo() -> None:
    client = await tenure.default_client()
    await client.create_node(NODE, exist_ok=True)

    # Two builds of report 7 take turns; a build of report 8 runs alongside.
    seven, eight = Report(7, "Q3 revenue"), Report(8, "Q3 costs")
    first = asyncio.create_task(build(seven, "builder-a"))
    await turn["a"].wait()
    second = asyncio.create_task(build(seven, "builder-b"))
    await build(eight, "builder-c")
    turn["c"].set()
    tokens = await asyncio.gather(first, second)
    print(f"report 7: built twice, in turn, tokens increasing: {tokens[0] < tokens[1]}")

    # blocking=False: the nightly job runs on one replica; the other skips it.
    running, finish = asyncio.Event(), asyncio.Event()
    winner = asyncio.create_task(nightly_digest("replica-1", running, finish))
    await running.wait()
    skipped = await nightly_digest("replica-2", running, finish)
    print(f"replica-2: the digest runs elsewhere, call skipped: {skipped is None}")
    finish.set()
    print(await winner)

    # timeout=: the ledger is held by another session; the call gives up.
    async with client.session(NODE) as other, other.mutex("ledger"):
        try:
            await post_to_ledger()
        except TimeoutError:
            print("ledger: busy for 0.2 s, gave up (TimeoutError)")
    await post_to_ledger()

    # A field that cannot be read: refused before anything is sent.
    try:
        await build(object(), "builder-x")  # type: ignore[arg-type]
    except InvalidArgumentError as error:
        print(f"builder-x: refused: {str(error).split(': ', 1)[1]}")

    # A loss cancels the function: an operator kills the default session.
    started = asyncio.Event()
    running_export = asyncio.create_task(export("customers", started))
    await started.wait()
    lost = await tenure.default_session()
    await client.kill_session(NODE, lost.id)
    try:
        await running_export
    except SessionExpiredError:
        print("export: cancelled, its session was killed (SessionExpiredError)")
    await build(seven, "builder-d")
    renewed = await tenure.default_session()
    print(f"builder-d: built again in a new default session: {renewed.id != lost.id}")
    await client.drop_node(NODE, force=True)


async def main() -> None:
    tenure.configure(os.environ.get("TENURE_URL") or "memory://locked-demo", node=NODE)
    try:
        await demo()
    finally:
        await tenure.close_default_client()


if __name__ == "__main__":
    asyncio.run(main())
