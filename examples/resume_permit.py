"""A worker that crashes and restarts resumes its permit by ticket.

The semaphore "permits" has one permit. A worker process (this script, started
again with ``--worker``) takes it and saves its session's ticket to a file
(``session.ticket().to_str()``), then works. A rival, here in this process, queues
for the permit. Then the worker is killed with SIGKILL: nothing is released, and
the session lives on for its recovery window (10 s). The worker is started again;
it finds the ticket, resumes its session (``client.session(node, resume=...)``)
and holds the very same permit, with the same fencing token: the rival did not get
it meanwhile. The restarted worker finishes and releases; only then does the rival
get the permit, with a greater token.

Run it against a server, etcd or Redis::

    TENURE_URL=tenure://127.0.0.1:6388 python examples/resume_permit.py
    TENURE_URL=etcd://127.0.0.1:2379 python examples/resume_permit.py
    TENURE_URL=redis://127.0.0.1:6379/0 python examples/resume_permit.py

Without ``TENURE_URL`` it starts a throwaway ``tenure serve`` of its own on a free
loopback port (data in a temporary directory). A ticket is a password to the
session: keep the file where only the worker can read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import tenure

NODE = "resume-demo"
PERMITS = "permits"
RECOVERY_WINDOW = 10.0  # seconds the session outlives its process
WAIT = 20.0  # the longest any one step may take, in seconds


# -- the worker: one process of its own --------------------------------------------------


async def worker(ticket_file: Path, ticket: str | None) -> None:
    """Take a permit (or, restarted with its ``ticket``, take it back), work, release."""
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    async with tenure.connect(os.environ["TENURE_URL"]) as client:
        if ticket is not None:
            session = await client.session(NODE, resume=ticket)
            [permit] = session.leases(PERMITS)
            print(f"worker: restarted, resumed session {session.id}: permit token {permit.token}")
        else:
            session = await client.session(NODE, recovery_window=RECOVERY_WINDOW)
            permit = await session.semaphore(PERMITS).acquire(1, data=b"worker")
            await asyncio.to_thread(save, ticket_file, session.ticket().to_str())
            print(f"worker: session {session.id} took the permit, token {permit.token}")
        sys.stdout.flush()
        async with permit:  # the work; cancelled if the permit is lost
            await stdin.readline()  # (here: until told the work is done)
        await asyncio.to_thread(ticket_file.unlink)  # done: nothing to resume any more
        print("worker: work done, permit released", flush=True)
        await session.close()
    pipe.close()


def save(ticket_file: Path, ticket: str) -> None:
    """Write the ticket whole, then rename: a crash never leaves half a ticket behind."""
    partial = ticket_file.with_suffix(".partial")
    partial.write_text(ticket)
    partial.replace(ticket_file)


# -- the demo: start the worker, kill it, start it again ----------------------------------


async def start_worker(url: str, ticket_file: Path) -> asyncio.subprocess.Process:
    """This script again, as the worker; its first line is read by :func:`line`."""
    warnings = [f"-W{option}" for option in sys.warnoptions]
    return await asyncio.create_subprocess_exec(
        *[sys.executable, *warnings, __file__, "--worker", str(ticket_file)],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "TENURE_URL": url},  # not argv: a password would show in ps
    )


async def line(process: asyncio.subprocess.Process) -> str:
    """The worker's next line, printed here too."""
    assert process.stdout is not None
    text = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().rstrip("\n")
    if not text:
        raise SystemExit(f"the worker exited with {await process.wait()} without a word")
    print(text, flush=True)
    return text


async def owners(session: tenure.Session) -> str:
    state = await session.semaphore(PERMITS).describe(owners=True, waiters=True)
    held = ", ".join(f"{o.data.decode()} (token {o.token})" for o in state.owners)
    return f"held by {held or 'nobody'}, {len(state.waiters)} waiting"


async def demo(url: str, ticket_file: Path) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(NODE, exist_ok=True)
        async with client.session(NODE, description="rival") as rival:
            await rival.semaphore(PERMITS).create(limit=1)
            first = await start_worker(url, ticket_file)
            await line(first)
            waiting = asyncio.create_task(rival.semaphore(PERMITS).acquire(1, data=b"rival"))
            async with asyncio.timeout(WAIT):  # until the rival is in line
                async for state in rival.semaphore(PERMITS).watch(waiters=True):
                    if state.waiters:
                        break

            print(f"main: SIGKILL the worker (pid {first.pid})")
            first.send_signal(signal.SIGKILL)
            print(f"main: worker exited with {await first.wait()}; permit {await owners(rival)}")
            second = await start_worker(url, ticket_file)
            await line(second)
            print(
                f"main: permit {await owners(rival)}; the rival still waits: {not waiting.done()}"
            )

            assert second.stdin is not None
            second.stdin.write(b"done\n")  # the restarted worker finishes its work
            await line(second)
            print(f"main: worker exited with {await second.wait()}")
            permit = await asyncio.wait_for(waiting, WAIT)
            print(f"main: the rival got the permit, token {permit.token}")
            await permit.release()
            await rival.semaphore(PERMITS).delete()
        await client.drop_node(NODE)


# -- a throwaway server, when no TENURE_URL is given --------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def throwaway_server(data_dir: str) -> Iterator[str]:
    """``tenure serve`` on a free loopback port, its data in ``data_dir``."""
    port = free_port()
    argv = [sys.executable, "-m", "tenure", "serve", "--port", str(port), "--data-dir", data_dir]
    process = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + WAIT
        while not listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"tenure serve did not start (exit status {process.poll()})")
            time.sleep(0.05)
        yield f"tenure://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


async def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        ticket_file = Path(sys.argv[2])
        ticket = await asyncio.to_thread(read_ticket, ticket_file)
        await worker(ticket_file, ticket)
        return
    url = os.environ.get("TENURE_URL")
    with tempfile.TemporaryDirectory(prefix="resume-permit-") as scratch:
        ticket_file = Path(scratch) / "worker.ticket"
        if url:
            await demo(url, ticket_file)
        else:
            with throwaway_server(str(Path(scratch) / "data")) as server_url:
                await demo(server_url, ticket_file)


def read_ticket(ticket_file: Path) -> str | None:
    """The ticket a crashed run of the worker saved, if there is one."""
    return ticket_file.read_text() if ticket_file.exists() else None


if __name__ == "__main__":
    asyncio.run(main())
