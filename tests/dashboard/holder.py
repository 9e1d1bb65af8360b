"""A tiny tenure client for the dashboard tests, run as a process of its own.

``python -m tests.dashboard.holder URL NODE MUTEX DESCRIPTION CLIENT_NAME [DATA]`` opens
a session with DESCRIPTION (connecting with CLIENT_NAME; its recovery window
``TENURE_TEST_RECOVERY_WINDOW`` seconds if set, else the client's default), takes
the mutex (with DATA: leads the election MUTEX with DATA as the leader's data), and
prints one JSON line: its token, session id, host and pid. Each line read from stdin is a
step: the first releases the mutex (``{"released": true}``), the second ends the
process. A lost session (an operator ended it) prints ``{"lost": ..., "message": ...}``
and ends it. Nothing waits longer than :data:`LIFETIME` seconds.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys

import tenure
from tenure.errors import LostError

#: The process gives up (exit status 3) after this many seconds whatever happens.
LIFETIME = 60.0
#: The environment variable that sets its session's recovery window, in seconds.
RECOVERY_WINDOW = "TENURE_TEST_RECOVERY_WINDOW"


def say(**fields: object) -> None:
    """One JSON line on stdout, flushed: the test reads it."""
    print(json.dumps(fields), flush=True)


async def hold(
    url: str, node: str, name: str, description: str, client_name: str, data: str | None = None
) -> None:
    """Take ``name`` (lead it, with ``data``), report it, release it and end when stdin
    says so."""
    loop = asyncio.get_running_loop()
    steps = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(steps), sys.stdin)
    async with tenure.connect(url, client_name=client_name) as client:
        await client.create_node(node, exist_ok=True)
        window = os.environ.get(RECOVERY_WINDOW)
        recovery_window = float(window) if window else None
        async with client.session(
            node, description=description, recovery_window=recovery_window
        ) as session:
            try:
                held = (
                    session.mutex(name)
                    if data is None
                    else session.election(name).campaign(data.encode())
                )
                async with held as lock:
                    host, pid = socket.gethostname(), os.getpid()
                    say(token=lock.token, session_id=session.id, host=host, pid=pid)
                    await steps.readline()
                say(released=True)
            except LostError as error:
                say(lost=type(error).__name__, message=str(error))
                return
            await steps.readline()


async def main(args: list[str]) -> int:
    """Run :func:`hold` within :data:`LIFETIME`."""
    try:
        async with asyncio.timeout(LIFETIME):
            await hold(*args)
    except TimeoutError:
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
