"""Make ``docs/dashboard.png``: the dashboard of a real server with a few holders.

Not part of the tests (they check the page; this only pictures it). Starts a
``tenure serve --http-port`` in a temporary directory, has clients in this process
hold a mutex with two waiters behind it, a counting semaphore and a mutex of another
node, takes a few quick grants so that the rate shows, and photographs the page in
Debian's headless chromium (Playwright, ``executable_path``; ``TENURE_CHROMIUM`` names
another). Run: ``.venv/bin/python -m bench.tools.dashboard_screenshot [--out PATH]``.

Internals: ``tenure._core.CreateSession`` and ``ClientIdentity``, sent raw (the
tests' wire client) to leave a session whose client vanished, which no public call
can do on purpose.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.wire import Clients, ServerProcess, free_port

import tenure
from tenure._core import CreateSession
from tenure._core.values import ClientIdentity

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("TENURE_CHROMIUM", "/usr/bin/chromium")
#: The scene is kept up at most this long, in seconds, whatever happens.
SCENE_SECONDS = 60.0


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
        # A session whose client vanished (its connection dropped): it shows when the
        # server will end it unless the client comes back.
        crashed = Clients()
        wire = await crashed.connect(port)
        who = ClientIdentity("batch-7", 31337, "cron-import")
        await wire.call(CreateSession("jobs", b"key", 45.0, "import that crashed", who))
        await crashed.close_all()
        for _ in range(40):  # some grants, for the rate
            async with jobs.mutex("heartbeat"):
                await asyncio.sleep(0.05)
        ready.set()
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.run_in_executor(None, done.wait, SCENE_SECONDS), None)
        for task in waiting:
            task.cancel()


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
                with sync_playwright() as playwright:
                    browser = playwright.chromium.launch(executable_path=CHROMIUM)
                    page = browser.new_page(viewport={"width": 1400, "height": 760})
                    page.goto(f"http://127.0.0.1:{http}/")
                    page.wait_for_selector('tr.semaphore[data-name="billing-export"] li.waiter')
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
