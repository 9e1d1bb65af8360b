"""One APScheduler across the fleet: the scheduler's jobs run only on the leader.

Every replica runs the same code: ``client.lead(node, "scheduler", work)``, whose
``work`` starts an APScheduler 3 ``AsyncIOScheduler`` (the fleet's periodic jobs,
each given the term's fencing token) and shuts it down when the term ends. So the
jobs run on one replica at a time: the leader. When its leadership is lost (here an
operator kills its session), ``work`` is cancelled at once, its scheduler is shut
down, and another replica's runner, waiting its turn, starts its own.

This is the "one celery beat / one scheduler across the fleet" recipe: the jobs'
writes should carry the token (``docs/fencing.md``), so a leader that was paused
past its loss cannot write after the next one.

The same code runs on every backend (``TENURE_URL``); it needs ``pip install
'apscheduler>=3.10,<4'``. Run it with::

    python examples/leader_apscheduler.py
    TENURE_URL=tenure://127.0.0.1:6388 python examples/leader_apscheduler.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from apscheduler.schedulers.asyncio import AsyncIOScheduler

import tenure

NODE = "apscheduler-demo"
#: How often the fleet's job runs, in seconds (a nightly report, made fast).
EVERY = 0.05


class Replica:
    """One replica of the service: its runner's terms, and its job's runs."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.runs: list[int] = []  # the token of each run of the job here
        self.ran = asyncio.Event()  # set at each run
        self.terms: asyncio.Queue[tenure.Leadership] = asyncio.Queue()
        self.ended: asyncio.Queue[str] = asyncio.Queue()

    async def report(self, token: int) -> None:
        """The fleet's periodic job (it would write somewhere, fenced by ``token``)."""
        self.runs.append(token)
        self.ran.set()

    async def work(self, leadership: tenure.Leadership) -> None:
        """While this replica leads: its scheduler runs the fleet's jobs."""
        scheduler = AsyncIOScheduler()
        scheduler.add_job(
            self.report,
            "interval",
            seconds=EVERY,
            args=[leadership.token],
            coalesce=True,
            misfire_grace_time=None,
        )
        scheduler.start()
        await self.terms.put(leadership)
        try:
            await asyncio.Event().wait()  # until leadership is lost, or the replica stops
        finally:
            scheduler.shutdown(wait=False)  # no job of this term starts any more
            reason = leadership.lost_reason
            await self.ended.put(type(reason).__name__ if reason else "stopped")


async def ran(replica: Replica, times: int) -> None:
    """Until ``replica``'s job has run ``times`` times."""
    while len(replica.runs) < times:
        replica.ran.clear()
        await replica.ran.wait()


async def main() -> None:
    # (memory://NAME: both clients share one in-process engine; a bare memory:// is private.)
    url = os.environ.get("TENURE_URL") or "memory://apscheduler-demo"
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node(NODE)
        first, second = Replica("replica-1"), Replica("replica-2")
        runners = [asyncio.create_task(one.lead(NODE, "scheduler", first.work, data=b"replica-1"))]
        term = await first.terms.get()
        runners.append(
            asyncio.create_task(two.lead(NODE, "scheduler", second.work, data=b"replica-2"))
        )
        print(f"replica-1: leading, token {term.token}: its scheduler runs the jobs")
        await ran(first, 3)
        print(f"replica-1: the job ran 3 times or more; on replica-2: {len(second.runs)} times")

        await one.kill_session(NODE, term.session.id)  # an operator ends its session
        print(f"replica-1: lost leadership ({await first.ended.get()}), scheduler shut down")
        runs_at_loss = len(first.runs)
        taken_over = await second.terms.get()
        print(f"replica-2: leading, token {taken_over.token}: its scheduler runs the jobs")
        await ran(second, 3)
        tokens = set(second.runs)
        print(
            f"replica-2: the job ran 3 times or more, all with token {taken_over.token}: "
            f"{tokens == {taken_over.token}}"
        )
        print(f"replica-1: no job ran after its loss: {len(first.runs) == runs_at_loss}")

        for runner in runners:  # the replicas stop: each resigns and closes its session
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        await one.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
