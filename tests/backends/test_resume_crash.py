"""A process that holds a lock is killed (SIGKILL); a new one resumes its session by ticket.

On a real ``tenure serve`` and a real etcd: the new process holds the lock with the
same fencing token, a waiter that queued meanwhile did not get it, and it gets it
(with a greater token) once the resumed lock is released.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import tenure
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import ServerProcess

WORKER = Path(__file__).with_name("resume_worker.py")
#: Seconds any one step of a worker may take (a real server answers in milliseconds).
STEP = 20.0


@pytest.fixture(params=["tenure", "etcd"])
def url(request: pytest.FixtureRequest) -> str:
    """The URL of a real backend of each kind."""
    if request.param == "tenure":
        server: ServerProcess = request.getfixturevalue("tenure_server")
        return f"tenure://127.0.0.1:{server.port}"
    member: EtcdCluster = request.getfixturevalue("etcd_member")
    return member.url(prefix=f"/crash/{uuid.uuid4().hex[:12]}/")


async def _worker(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )


async def _line(process: asyncio.subprocess.Process) -> list[str]:
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), STEP)
    assert line, f"worker {process.pid} ended without a word (exit {process.returncode})"
    return line.decode().split()


@pytest.fixture
async def workers() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """Worker processes of the test, killed (by PID) and reaped at its end."""
    started: list[asyncio.subprocess.Process] = []
    yield started
    for process in started:
        if process.returncode is None:
            process.kill()
        await asyncio.wait_for(process.wait(), STEP)


async def test_a_killed_process_is_resumed_by_a_new_one(
    url: str, workers: list[asyncio.subprocess.Process]
) -> None:
    async with tenure.connect(url) as client:
        await client.create_node("crash")
        crashing = await _worker("take", url, "crash")
        workers.append(crashing)
        token, ticket = await _line(crashing)
        waiter = await client.session("crash")
        waiting = asyncio.ensure_future(waiter.mutex("job").lock())
        for _ in range(int(STEP / 0.05)):
            described = await waiter.semaphore("job").describe(waiters=True)
            if described.waiters:
                break
            await asyncio.sleep(0.05)
        assert [w.session_id for w in described.waiters] == [waiter.id]

        crashing.send_signal(signal.SIGKILL)
        await asyncio.wait_for(crashing.wait(), STEP)
        resumer = await _worker("resume", url, "crash", ticket)
        workers.append(resumer)
        word, resumed_token, held, session_id = await _line(resumer)

        assert (word, resumed_token, held) == ("resumed", token, "True")
        assert int(session_id) == tenure.SessionTicket.from_str(ticket).session_id
        described = await waiter.semaphore("job").describe(owners=True, waiters=True)
        assert [(o.session_id, o.token) for o in described.owners] == [
            (int(session_id), int(token))
        ]
        assert [w.session_id for w in described.waiters] == [waiter.id]
        assert not waiting.done()

        assert resumer.stdin is not None
        resumer.stdin.write(b"release\n")
        await resumer.stdin.drain()
        assert await _line(resumer) == ["released"]
        lock = await asyncio.wait_for(waiting, STEP)
        assert lock.token > int(token)
        assert await asyncio.wait_for(resumer.wait(), STEP) == 0
