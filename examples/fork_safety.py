"""Worker processes made by ``fork`` each use tenure through a client of their own.

A parent process (a gunicorn master with ``--preload``, a Celery prefork pool, a
multiprocessing pool: they all fork) opens a client and holds the lock
"nightly-batch", then forks two workers. Each worker bills its invoices with
``@tenure.sync.locked("invoice-{number}")``, over the process's default client,
which a forked child opens for itself: a session of its own, never the parent's. The
parent's client, inherited as memory, opens a connection of the child's own on its
next call (as redis-py's pool does), and closing it there ends nothing of the
parent's; the parent's session refuses to work in the child (ForkedClientError: its
holds are the parent's), and a worker cannot take "nightly-batch", which that
session holds. When the workers have exited, the parent still holds its
lock, in the same session, and its client works on.

It needs a server that both processes reach (``memory://`` lives in one process)::

    TENURE_URL=tenure://127.0.0.1:6388 python examples/fork_safety.py

Without ``TENURE_URL`` it starts a throwaway ``tenure serve`` of its own on a free
loopback port (data in a temporary directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import tenure
import tenure.sync
from tenure.errors import ForkedClientError

NODE = "fork-demo"
WAIT = 20.0  # the longest any one step may take, in seconds


@tenure.sync.locked("invoice-{number}")
def bill(number: int) -> int:
    """Bill one invoice, once at a time across every process; the session it ran in."""
    return tenure.sync.current_lock().session.id


@tenure.sync.locked("nightly-batch", blocking=False)
def batch() -> str:
    return "ran"


def worker(
    name: str,
    invoices: list[int],
    parents: tenure.sync.Client,
    parents_session: tenure.sync.Session,
    results: multiprocessing.Queue[str],
) -> None:
    """In a child made by fork: bill ``invoices``, and say what the parent's client and
    session do."""
    sessions = {bill(number) for number in invoices}
    served = NODE in parents.list_nodes()  # on a connection of the child's own
    try:
        parents_session.mutex("nightly-batch").try_lock()
        refused = "used it"
    except ForkedClientError:
        refused = "ForkedClientError"
    parents.close()  # the child's connection: nothing of the parent's ends
    skipped = batch() is None
    session = tenure.sync.default_session().id
    tenure.sync.close_default_client()  # the worker's own session closes
    results.put(
        f"{name}: billed invoices {invoices} in a session of its own ({session}): "
        f"{sessions == {session}}\n"
        f"{name}: the parent's client serves it on its own connection: {served}\n"
        f"{name}: the parent's session refuses it here: {refused}\n"
        f"{name}: 'nightly-batch' is held by the parent: skipped: {skipped}"
    )


def demo(url: str) -> None:
    tenure.configure(url, node=NODE)
    parents = tenure.sync.connect(url)
    parents.create_node(NODE, exist_ok=True)
    session = parents.session(NODE, description="the parent")
    lock = session.mutex("nightly-batch").lock()
    print(f"parent: holds 'nightly-batch' in session {session.id}, token {lock.token}")
    context = multiprocessing.get_context("fork")
    results: multiprocessing.Queue[str] = context.Queue()
    workers = [
        context.Process(target=worker, args=(f"worker-{i}", invoices, parents, session, results))
        for i, invoices in ((1, [101, 103]), (2, [102, 104]))
    ]
    for process in workers:
        process.start()
    reports = sorted(results.get(timeout=WAIT) for _ in workers)
    for process in workers:
        process.join(WAIT)
    print("\n".join(reports))
    exits = [process.exitcode for process in workers]
    holder = session.mutex("nightly-batch").describe().owner
    held = holder is not None and holder.session_id == session.id and not lock.lost.is_set()
    where = f"in session {session.id}"
    print(f"parent: workers exited {exits}; still holds 'nightly-batch' {where}: {held}")
    lock.release()
    parents.drop_node(NODE, force=True)
    parents.close()


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
    # The parent is plain blocking code, as a gunicorn master is; it forks from the
    # main thread.
    url = os.environ.get("TENURE_URL")
    if url:
        demo(url)
        return
    with (
        tempfile.TemporaryDirectory(prefix="fork-safety-") as scratch,
        throwaway_server(os.path.join(scratch, "data")) as server_url,
    ):
        demo(server_url)


if __name__ == "__main__":
    asyncio.run(main())
