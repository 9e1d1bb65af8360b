"""Up to N concurrent holders on Redis: a pool of permits, kept alive, and resumed after a crash.

The semaphore "slots" has 2 permits; the node gives every permit a lease TTL of
3 s that tenure renews while its holder lives (a holder that froze or died without
its session would lose it). A worker process (this script again, with ``--worker``)
takes a permit and saves its session's ticket to a file; a steady worker here takes
the other; two more queue (FIFO, woken by a push from Redis, not by polling). A
watcher follows the owners, and never sees more than 2. Then the worker process
is killed with SIGKILL; its replacement (started beforehand, connected, as a
supervisor's spare is) resumes its session by ticket (``client.session(node,
resume=...)``) and holds the very same permit, with the same fencing token,
renewed at once and on; the queued workers did not get it meanwhile. A restart
must take less than the lease TTL, less the time since the dead worker's last
renewal (a third of a TTL at most): choose the TTL for the restarts you have.
The others then finish in turn, in the order they queued.

Run it against your Redis 7 (tenure with its redis extra: ``pip install 'tenure[redis]'``)::

    TENURE_URL=redis://127.0.0.1:6379/0 python examples/redis_worker_pool.py

Its keys live under ``tenure:`` (``?prefix=...`` in the URL to choose), in the node
"worker-pool-demo", dropped at the end. Without ``TENURE_URL`` it starts a
throwaway ``redis-server`` of its own on a free loopback port (the binary must be
on PATH; Debian and Ubuntu: ``apt-get install redis-server``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tenure

NODE = "worker-pool-demo"
SLOTS = "slots"
PERMITS = 2
LEASE = 5.0  # seconds a permit lasts unless renewed (tenure renews it while held)
RECOVERY_WINDOW = 10.0  # seconds a session outlives its process
WAIT = 20.0  # the longest any one step may take, in seconds


# -- the worker process ----------------------------------------------------------------


async def worker(ticket_file: Path, *, spare: bool) -> None:
    """Take a permit (or, restarted, take it back by ticket), work until told, release.

    ``spare``: connect, say so, and wait for a line before looking for a ticket.
    """
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    pipe, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    async with tenure.connect(os.environ["TENURE_URL"]) as client:
        if spare:
            print("crashy: a spare, connected", flush=True)
            await stdin.readline()
        ticket = await asyncio.to_thread(read_ticket, ticket_file)
        if ticket is not None:
            session = await client.session(NODE, resume=ticket)
            [permit] = session.leases(SLOTS)
            print(f"crashy: restarted, resumed session {session.id}: permit token {permit.token}")
        else:
            session = await client.session(NODE, recovery_window=RECOVERY_WINDOW)
            permit = await session.semaphore(SLOTS).acquire(1, data=b"crashy")
            await asyncio.to_thread(save_ticket, ticket_file, session.ticket().to_str())
            print(f"crashy: session {session.id} took a permit, token {permit.token}")
        sys.stdout.flush()
        async with permit:  # the work; cancelled if the permit is lost
            await stdin.readline()
        await asyncio.to_thread(ticket_file.unlink)  # done: nothing to resume any more
        await permit.release()
        print(f"crashy: work done, permit released (token {permit.token})", flush=True)
        await session.close()
    pipe.close()


def read_ticket(ticket_file: Path) -> str | None:
    """The ticket a crashed run of the worker saved, if there is one."""
    return ticket_file.read_text() if ticket_file.exists() else None


def save_ticket(ticket_file: Path, ticket: str) -> None:
    """Write the ticket whole, then rename: a crash never leaves half a ticket behind."""
    partial = ticket_file.with_suffix(".partial")
    partial.write_text(ticket)
    partial.replace(ticket_file)


# -- the demo --------------------------------------------------------------------------


async def start_worker(
    url: str, ticket_file: Path, *, spare: bool = False
) -> asyncio.subprocess.Process:
    """This script again, as the worker process (``spare``: waiting to be told to start)."""
    warnings = [f"-W{option}" for option in sys.warnoptions]
    role = "--spare" if spare else "--worker"
    return await asyncio.create_subprocess_exec(
        *[sys.executable, *warnings, __file__, role, str(ticket_file)],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "TENURE_URL": url},
    )


async def line(process: asyncio.subprocess.Process) -> str:
    """The worker's next line, printed here too."""
    assert process.stdout is not None
    text = (await asyncio.wait_for(process.stdout.readline(), WAIT)).decode().rstrip("\n")
    if not text:
        raise SystemExit(f"the worker exited with {await process.wait()} without a word")
    print(text, flush=True)
    return text


async def pool_worker(client: tenure.Client, name: str, hold_for: asyncio.Event) -> None:
    """Wait for a permit (pushed when granted), hold it until ``hold_for``, release."""
    async with client.session(NODE, description=name) as session:
        async with session.semaphore(SLOTS).acquire(1, data=name.encode()) as permit:
            print(f"{name}: took a permit, token {permit.token}", flush=True)
            await hold_for.wait()
        print(f"{name}: released", flush=True)


def in_line(count: int) -> Callable[[tenure.SemaphoreDescription], bool]:
    """Whether ``count`` workers hold a permit or wait for one."""
    return lambda seen: len(seen.owners) + len(seen.waiters) == count


async def state(session: tenure.Session) -> str:
    found = await session.semaphore(SLOTS).describe(owners=True, waiters=True)
    held = ", ".join(sorted(o.data.decode() for o in found.owners))
    return (
        f"{len(found.owners)} of {found.limit} permits held ({held}), {len(found.waiters)} waiting"
    )


async def demo(url: str, ticket_file: Path) -> None:
    clients = [await tenure.connect(url) for _ in range(4)]
    try:
        admin = clients[0]
        with contextlib.suppress(tenure.errors.NotFoundError):
            await admin.drop_node(NODE, force=True)  # a run interrupted earlier
        await admin.create_node(NODE, default_lease=LEASE)
        observer = await admin.session(NODE, description="observer")
        await observer.semaphore(SLOTS).create(limit=PERMITS)
        most = 0
        latest: tenure.SemaphoreDescription | None = None
        changed = asyncio.Condition()

        async def follow() -> None:  # pushed changes of the queue, never polled
            nonlocal most, latest
            async for seen in observer.semaphore(SLOTS).watch(owners=True, waiters=True):
                most = max(most, len(seen.owners))
                async with changed:
                    latest = seen
                    changed.notify_all()

        async def until(seen: Callable[[tenure.SemaphoreDescription], bool]) -> None:
            def ready() -> bool:
                return latest is not None and seen(latest)

            async with changed:
                await asyncio.wait_for(changed.wait_for(ready), WAIT)

        following = asyncio.create_task(follow())
        first = await start_worker(url, ticket_file)
        await line(first)
        done = {name: asyncio.Event() for name in ("steady", "w1", "w2")}
        tasks = {}
        for i, name in enumerate(done):
            tasks[name] = asyncio.create_task(pool_worker(clients[1 + i], name, done[name]))
            await until(in_line(2 + i))  # they queue in this order: each before the next asks
        print(f"main: {await state(observer)}", flush=True)

        second = await start_worker(url, ticket_file, spare=True)
        await line(second)  # connected: the restart needs no more than a resume
        print("main: SIGKILL crashy", flush=True)
        first.send_signal(signal.SIGKILL)
        print(f"main: crashy exited with {await first.wait()}; {await state(observer)}")
        assert second.stdin is not None
        second.stdin.write(b"go\n")
        await line(second)
        started = time.monotonic()
        await asyncio.sleep(LEASE + 0.5)  # past the lease: the resumed permit is renewed
        print(f"main: after {time.monotonic() - started:.0f} s more: {await state(observer)}")

        done["steady"].set()  # steady leaves: w1, first in line, gets its permit
        await asyncio.wait_for(tasks["steady"], WAIT)
        second.stdin.write(b"done\n")  # crashy finishes: w2 gets its permit
        await line(second)
        print(f"main: crashy exited with {await second.wait()}", flush=True)
        await until(lambda seen: {o.data for o in seen.owners} == {b"w1", b"w2"})
        print(f"main: {await state(observer)}", flush=True)
        for name in ("w1", "w2"):
            done[name].set()
            await asyncio.wait_for(tasks[name], WAIT)
        following.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await following  # its watch is disarmed before the clients close
        print(f"main: the most holders at once: {most} (of {PERMITS})", flush=True)
    finally:
        with contextlib.suppress(tenure.errors.TenureError):
            await clients[0].drop_node(NODE, force=True)
        for client in clients:
            await client.aclose()


@contextlib.contextmanager
def throwaway_redis() -> Iterator[str]:
    """A redis-server of our own on a free loopback port, removed afterwards."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("set TENURE_URL=redis://HOST:PORT/DB, or install redis-server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", tmp, "--save", ""]
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port)):
                    break
                time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.kill()
            process.wait(10)


async def main() -> None:
    if sys.argv[1:2] in (["--worker"], ["--spare"]):
        await worker(Path(sys.argv[2]), spare=sys.argv[1] == "--spare")
        return
    url = os.environ.get("TENURE_URL")
    with tempfile.TemporaryDirectory(prefix="worker-pool-") as scratch:
        ticket_file = Path(scratch) / "crashy.ticket"
        if url:
            await demo(url, ticket_file)
        else:
            with throwaway_redis() as throwaway:
                await demo(throwaway, ticket_file)


if __name__ == "__main__":
    asyncio.run(main())
