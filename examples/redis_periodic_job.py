"""One instance does the periodic job, on Redis: try the lock each period, renew, report loss.

Three instances of a service (three clients here, as three processes would be) each
try the lock "periodic-job" at every period. The one that gets it runs the job
while it holds the lock; the lock has a lease TTL (the node's ``default_lease``) that
tenure renews by itself, so a long job keeps it and a frozen holder loses it. Anyone
can see who holds it, since when and with which fencing token (the owner's data).
Releasing twice is harmless. Losing the lock (here an operator deletes it by force)
is reported at once and stops the job; another instance takes over at its next
period, with a greater token.

Run it against your Redis 7 (tenure with its redis extra: ``pip install 'tenure[redis]'``)::

    TENURE_URL=redis://127.0.0.1:6379/0 python examples/redis_periodic_job.py

Its keys live under ``tenure:`` (``?prefix=...`` in the URL to choose), in the node
"periodic-job-demo", dropped at the end. Without ``TENURE_URL`` it starts a
throwaway ``redis-server`` of its own on a free loopback port (the binary must be on
PATH; Debian and Ubuntu: ``apt-get install redis-server``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator

import tenure
from tenure.errors import LostError

NODE = "periodic-job-demo"
LOCK = "periodic-job"
PERIOD = 0.3  # seconds between two tries of each instance
LEASE = 3.0  # seconds the lock lasts unless renewed (tenure renews it while held)
JOB_STEPS = 12  # steps of one job run, each PERIOD long (3.6 s: longer than the lease)


async def instance(client: tenure.Client, name: str, periods: int, done: asyncio.Event) -> None:
    """Try the lock each period; holding it, run the job until it ends or the lock is lost."""
    async with client.session(NODE, description=name) as session:
        for _ in range(periods):
            if done.is_set():
                return
            since = f"{name} since {time.time():.3f}".encode()
            lock = await session.mutex(LOCK).try_lock(data=since)
            if lock is None:
                await asyncio.sleep(PERIOD)
                continue
            print(f"{name}: took the lock, token {lock.token}", flush=True)
            try:
                async with lock:  # a loss cancels this block and raises the loss
                    for step in range(1, JOB_STEPS + 1):
                        print(f"{name}: job step {step}/{JOB_STEPS}", flush=True)
                        await asyncio.sleep(PERIOD)
                    print(f"{name}: job done, renewed past its {LEASE:g} s lease", flush=True)
            except LostError as error:
                print(f"{name}: lost the lock ({type(error).__name__}), job stopped", flush=True)
                await asyncio.sleep(2 * PERIOD)  # back off: another instance's turn
                continue
            done.set()  # before the release: no other instance starts the job again
            await lock.release()
            await lock.release()  # idempotent: releasing again is a no-op
            print(f"{name}: released (twice: idempotent)", flush=True)
            return


async def held(client: tenure.Client) -> None:
    """Until an instance holds the lock (told by a push: a watch, not a poll)."""
    async with client.session(NODE, description="inspector") as session:
        async for seen in session.semaphore(LOCK).watch(owners=True):
            if seen.owners:
                return


async def inspect(client: tenure.Client) -> None:
    """Who holds the lock, since when, with which token (anyone may ask)."""
    async with client.session(NODE, description="inspector") as session:
        description = await session.semaphore(LOCK).describe(owners=True)
        for owner in description.owners:
            holder, _, since = owner.data.decode().partition(" since ")
            held_for = time.time() - float(since)
            print(f"inspector: held by {holder} (token {owner.token})", flush=True)
            print(f"inspector: held for {held_for:.1f} s", flush=True)


async def run(url: str) -> None:
    """The demo on the Redis at ``url``."""
    clients = [await tenure.connect(url) for _ in range(5)]
    try:
        admin = clients[-1]
        with contextlib.suppress(tenure.errors.NotFoundError):
            await admin.drop_node(NODE, force=True)  # a run interrupted earlier
        await admin.create_node(NODE, default_lease=LEASE)
        done = asyncio.Event()
        names = ["instance-a", "instance-b", "instance-c"]
        tasks = []
        for i, name in enumerate(names):
            tasks.append(asyncio.create_task(instance(clients[i], name, 30, done)))
            await asyncio.sleep(0.05)  # instance-a tries first
        await held(clients[3])
        await inspect(clients[3])
        async with admin.session(NODE, description="operator") as operator:
            await operator.semaphore(LOCK).delete(force=True)
            print("operator: deleted the lock by force", flush=True)
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    finally:
        with contextlib.suppress(tenure.errors.TenureError):
            await clients[-1].drop_node(NODE, force=True)
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
    url = os.environ.get("TENURE_URL")
    if url:
        await run(url)
        return
    with throwaway_redis() as throwaway:
        await run(throwaway)


if __name__ == "__main__":
    asyncio.run(main())
