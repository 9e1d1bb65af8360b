"""Make ``docs/dashboard.png``: the dashboard of a real server, as an operator meets it.

Not part of the tests (they check the page; this only pictures it). Starts a
``tenure serve --http-port`` in a temporary directory with a dozen nodes: on one
(``billing``), clients in this process hold a mutex with two waiters behind it and a
counting semaphore, and take quick grants so that the rates show; on another
(``jobs``), a mutex is held by a process that is then killed (SIGKILL: its holder
shows disconnected, with its recovery window's time left) and another by a live
client; the other ten are idle, folded into one line. It photographs the page in
Debian's headless chromium (Playwright, ``executable_path``; ``TENURE_CHROMIUM`` names
another). Run: ``.venv/bin/python -m bench.tools.dashboard_screenshot [--out PATH]``.

The killed holder is ``tests/dashboard/holder.py``, the dashboard tests' own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.wire import ServerProcess, free_port

import tenure

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TENURE_CHROMIUM", "/usr/bin/chromium")
#: The scene is kept up at most this long, in seconds, whatever happens.
SCENE_SECONDS = 60.0
#: The nodes where nothing happens (a fleet's usual many), folded on the page.
IDLE_NODES = (
    "analytics", "auth", "catalog", "checkout", "email",
    "inventory", "ledger", "media", "search", "shipping",
)  # fmt: skip


@contextlib.asynccontextmanager
async def holder(
    url: str, node: str, description: str, client_name: str
) -> AsyncIterator[tenure.Session]:
    """A session of its own client (so each shows its own client name)."""
    async with tenure.connect(url, client_name=client_name) as client:
        await client.create_node(node, exist_ok=True)
        async with client.session(node, description=description) as session:
            yield session


async def scene(port: int, ready: threading.Event, done: threading.Event) -> None:
    """Holders and waiters, until ``done`` is set (or :data:`SCENE_SECONDS` pass)."""
    url = f"tenure://127.0.0.1:{port}"
    async with contextlib.AsyncExitStack() as stack:
        export = await stack.enter_async_context(
            holder(url, "billing", "nightly export 2026-11-22", "billing-worker")
        )
        await stack.enter_async_context(export.mutex("billing-export"))
        waiting = []
        for description, name in [("retry of export", "billing-retry"), ("manual", "ops-cli")]:
            session = await stack.enter_async_context(holder(url, "billing", description, name))
            waiting.append(asyncio.ensure_future(session.mutex("billing-export").lock()))
            await asyncio.sleep(0.3)  # they queue in this order
        pool = export.semaphore("db-pool")
        await pool.create(limit=5, exist_ok=True)
        for index, count in enumerate((2, 1)):
            session = await stack.enter_async_context(
                holder(url, "billing", f"report {index + 1}", "report-runner")
            )
            await stack.enter_async_context(session.semaphore("db-pool").acquire(count=count))
        jobs = await stack.enter_async_context(holder(url, "jobs", "reindex search", "indexer"))
        await stack.enter_async_context(jobs.mutex("reindex"))
        async with tenure.connect(url) as admin:
            for node in IDLE_NODES:
                await admin.create_node(node, exist_ok=True)
        # A connected client that holds nothing: its node is idle all the same.
        await stack.enter_async_context(holder(url, "search", "query router", "router"))
        for _ in range(40):  # some grants, for the rate
            async with export.mutex("heartbeat"):
                await asyncio.sleep(0.05)
        ready.set()
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.run_in_executor(None, done.wait, SCENE_SECONDS), None)
        for task in waiting:
            task.cancel()


@contextlib.contextmanager
def killed_holder(port: int) -> Iterator[None]:
    """A process that takes the mutex ``nightly-import`` of node ``jobs`` (a recovery
    window of 90 s) and is then killed: the server keeps its session and hold."""
    env = {**os.environ, "TENURE_TEST_RECOVERY_WINDOW": "90"}
    args = [f"tenure://127.0.0.1:{port}", "jobs", "nightly-import", "import 2026-11-22", "cron"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.dashboard.holder", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())  # it holds
        proc.kill()
        proc.wait(SCENE_SECONDS)
        yield
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(SCENE_SECONDS)


def main() -> int:
    """Serve, set the scene, photograph the page."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.tools.dashboard_screenshot", description=__doc__
    )
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard.png")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        http = free_port()
        with ServerProcess(
            Path(tmp) / "data", "--fsync", "off", "--http-port", str(http)
        ) as server:
            ready, done = threading.Event(), threading.Event()
            port = server.port
            clients = threading.Thread(target=lambda: asyncio.run(scene(port, ready, done)))
            clients.start()
            try:
                if not ready.wait(SCENE_SECONDS):
                    raise SystemExit("the scene was not set in time")
                with killed_holder(port), sync_playwright() as playwright:
                    browser = playwright.chromium.launch(executable_path=CHROMIUM)
                    page = browser.new_page(viewport={"width": 1400, "height": 800})
                    page.goto(f"http://127.0.0.1:{http}/")
                    page.wait_for_selector('tr.semaphore[data-name="billing-export"] li.waiter')
                    page.wait_for_selector(
                        'tr.semaphore[data-name="nightly-import"] .owner .disconnected'
                    )
                    page.wait_for_timeout(2500)  # "held for" ticks; the rate settles
                    page.screenshot(path=str(args.out), full_page=True)
                    browser.close()
            finally:
                done.set()
                clients.join(SCENE_SECONDS)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
