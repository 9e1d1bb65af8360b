"""One APScheduler across the fleet: the scheduler's jobs run only on the leader.

Every replica of the service runs this same program. It leads with
``client.lead(node, "scheduler", work)``, whose ``work`` starts an APScheduler 3
``AsyncIOScheduler`` (the fleet's periodic jobs, each given the term's fencing
token) and shuts it down when the term ends. So the jobs run on one replica at a
time: the leader. The others wait their turn in the election.

When the leader stops (Ctrl-C or SIGTERM) its runner resigns and the next replica
starts its scheduler at once. When the leader's process dies (``kill -9``, a crash,
a lost machine) nothing is resigned: the store ends its session once its connection
has stayed away for the recovery window (``RECOVERY_WINDOW``, 5 s here), and then
the next replica leads, with a greater token. A leader that only lost its
leadership (its session killed or expired) has its ``work`` cancelled and its
scheduler shut down at once. The jobs' writes should carry the token
(``docs/fencing.md``), so a leader paused past its loss cannot write after the next
one.

Run two replicas against a backend both reach (the default ``memory://`` lives in
one process: a lone replica), then kill the leader::

    tenure serve --port 6388
    TENURE_URL=tenure://127.0.0.1:6388 REPLICA=a python examples/leader_apscheduler.py
    TENURE_URL=tenure://127.0.0.1:6388 REPLICA=b python examples/leader_apscheduler.py
    kill -9 <the leader's pid>  # the other prints "leading with token N" within 5 s

Each replica prints each job it runs with the token of its term. It needs
``pip install 'apscheduler>=3.10,<4'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal

from apscheduler.schedulers.asyncio import AsyncIOScheduler

import tenure

NODE = "apscheduler-demo"
ELECTION = "scheduler"
#: The fleet's periodic jobs, each every so many seconds (a nightly report and an
#: hourly cleanup, made fast).
JOBS = {"report": 0.1, "cleanup": 0.25}

REPLICA = os.environ.get("REPLICA", "replica")
#: Seconds the store keeps a silent leader's session (and its leadership) before the
#: next replica takes over: how long a leader may take to come back, against how
#: long the fleet may go without its jobs.
RECOVERY_WINDOW = float(os.environ.get("RECOVERY_WINDOW", "5"))


def not_a_cancelled_job(record: logging.LogRecord) -> bool:
    """Drops APScheduler's "Error running job" for a job cancelled by ``shutdown``.

    Ending a term shuts its scheduler down, which cancels a job coroutine still
    running: that is the point (no job of an ended term goes on), not a job's error.
    Any other error of a job is still logged.
    """
    error = record.exc_info[1] if record.exc_info else None
    return not isinstance(error, asyncio.CancelledError)


logging.getLogger("apscheduler.executors.default").addFilter(not_a_cancelled_job)


async def run_job(job: str, token: int) -> None:
    """One run of a fleet's job: it would write somewhere, fenced by ``token``."""
    print(f"{REPLICA}: job {job} ran with token {token}", flush=True)


async def work(leadership: tenure.Leadership) -> None:
    """While this replica leads: its scheduler runs the fleet's jobs."""
    scheduler = AsyncIOScheduler()
    for job, every in JOBS.items():
        scheduler.add_job(
            run_job,
            "interval",
            seconds=every,
            args=[job, leadership.token],
            id=job,
            coalesce=True,  # runs missed while the loop was busy run once, not in a burst
            misfire_grace_time=None,
        )
    scheduler.start()
    print(f"{REPLICA}: leading with token {leadership.token}: its scheduler runs", flush=True)
    try:
        await asyncio.Event().wait()  # until leadership is lost, or the replica stops
    finally:
        scheduler.shutdown(wait=False)  # no job of this term starts any more
        if (reason := leadership.lost_reason) is not None:
            print(f"{REPLICA}: lost leadership ({type(reason).__name__})", flush=True)


async def main() -> None:
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopped.set)
    url = os.environ.get("TENURE_URL") or "memory://apscheduler-demo"
    async with tenure.connect(url, client_name=REPLICA) as client:
        await client.create_node(NODE, exist_ok=True)
        runner = asyncio.create_task(
            client.lead(
                NODE,
                ELECTION,
                work,
                data=REPLICA.encode(),
                recovery_window=RECOVERY_WINDOW,
                description=REPLICA,
            )
        )
        print(f"{REPLICA}: campaigning; the jobs run on the leader only", flush=True)
        stopping = asyncio.create_task(stopped.wait())
        await asyncio.wait({runner, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if runner.done():
            runner.result()  # lead() ends by itself only with an error: raise it
        runner.cancel()  # resigns and closes the session: the next replica leads at once
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        print(f"{REPLICA}: stopped, resigned", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
