"""A FastAPI service whose background job runs on one replica only: the leader.

Every replica serves the API; the app's lifespan also starts ``client.lead(...)`` in
a background task, so exactly one replica at a time runs the job (here it counts
its runs, with the term's fencing token, which its writes would carry). When that
replica stops (SIGTERM: uvicorn ends the lifespan, which cancels the runner: it
resigns and closes its session), or loses its leadership, another replica's runner,
waiting its turn, starts the job there at once. When its process dies (``kill -9``,
a crash) nothing is resigned: the store ends its session once its connection has
stayed away for the recovery window (``RECOVERY_WINDOW``, 5 s here), and then the
next replica leads, with a greater token. ``GET /status`` says what this replica
does.

Run two replicas against one backend (``memory://`` cannot be shared by two
processes), then stop or kill the leader::

    tenure serve --port 6388
    TENURE_URL=tenure://127.0.0.1:6388 REPLICA=a PORT=8001 python examples/leader_fastapi.py
    TENURE_URL=tenure://127.0.0.1:6388 REPLICA=b PORT=8002 python examples/leader_fastapi.py
    curl -s 127.0.0.1:8001/status   # {"replica": "a", "leading": true, "token": 1, ...}
    kill -9 <a's pid>; curl -s 127.0.0.1:8002/status  # within 5 s: b leads, token 2

It needs ``pip install fastapi uvicorn``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator

import uvicorn
from fastapi import FastAPI

import tenure

NODE = "fastapi-demo"
#: How often the job runs while this replica leads, in seconds.
EVERY = 0.05

REPLICA = os.environ.get("REPLICA", "replica")
#: Seconds the store keeps a silent leader's session (and its leadership) before the
#: next replica takes over: how long a leader may take to come back, against how
#: long the fleet may go without its job.
RECOVERY_WINDOW = float(os.environ.get("RECOVERY_WINDOW", "5"))


class Job:
    """The background job, and what this replica knows of it."""

    def __init__(self) -> None:
        self.token: int | None = None  # the term's token while leading, else None
        self.runs = 0
        self.terms = 0

    async def run(self, leadership: tenure.Leadership) -> None:
        """While this replica leads (cancelled at once when it stops leading)."""
        self.token, self.terms = leadership.token, self.terms + 1
        print(f"{REPLICA}: leading with token {leadership.token}: the job runs here", flush=True)
        try:
            while True:
                self.runs += 1  # the job's work, fenced by leadership.token
                await asyncio.sleep(EVERY)
        finally:
            self.token = None


job = Job()


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Connect, and lead in the background for as long as the app runs."""
    url = os.environ.get("TENURE_URL") or "memory://fastapi-demo"
    async with tenure.connect(url, client_name=REPLICA) as client:
        await client.create_node(NODE, exist_ok=True)
        runner = asyncio.create_task(
            client.lead(
                NODE,
                "background-job",
                job.run,
                data=REPLICA.encode(),
                recovery_window=RECOVERY_WINDOW,
                description=REPLICA,
            )
        )
        try:
            yield
        finally:
            runner.cancel()  # resigns and closes the session: another replica takes over
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            print(f"{REPLICA}: stopped, resigned", flush=True)


app = FastAPI(lifespan=lifespan)


@app.get("/status")
async def status() -> dict[str, object]:
    """Whether this replica leads (runs the job), with which token, and its runs."""
    return {
        "replica": REPLICA,
        "leading": job.token is not None,
        "token": job.token,
        "runs": job.runs,
        "terms": job.terms,
    }


async def main() -> None:
    port = int(os.environ.get("PORT", "8000"))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await uvicorn.Server(config).serve()


if __name__ == "__main__":
    asyncio.run(main())
