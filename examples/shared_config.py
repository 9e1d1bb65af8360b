"""Shared configuration: a persistent semaphore's data, pushed with update(), watched.

An admin keeps the service's configuration as JSON in the data of the semaphore
"config" (the semaphore is never acquired here; it is just a watched value that
outlives every session). ``update()`` pushes a new version, and every watcher of
``watch(data=True)`` gets the current version at once, then each change.

Watchers never fall behind: changes made while a watcher is busy are merged, and
it gets the latest version next. "web-2" below is slow to reload, so it jumps
from version 1 straight to version 4.

Run it with::

    python examples/shared_config.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/shared_config.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import json
import os

import tenure

NODE = "config-demo"
LATEST = 4


async def watcher(
    client: tenure.Client, name: str, seen: asyncio.Queue[int], reload_done: asyncio.Event
) -> None:
    async with client.session(NODE, description=name) as session:
        async for state in session.semaphore("config").watch(data=True):
            config = json.loads(state.data)
            print(f"{name}: config version {config['version']}: {config}")
            await seen.put(config["version"])
            await reload_done.wait()  # apply the config (slow for web-2)
            if config["version"] == LATEST:
                return


async def main() -> None:
    config: dict[str, object] = {"version": 1, "log_level": "info", "pool_size": 4}
    async with tenure.connect(os.environ.get("TENURE_URL", "memory://")) as client:
        await client.create_node(NODE)
        async with client.session(NODE, description="admin") as admin:
            semaphore = admin.semaphore("config")
            await semaphore.create(limit=1, data=json.dumps(config).encode())

            fast_seen: asyncio.Queue[int] = asyncio.Queue()
            slow_seen: asyncio.Queue[int] = asyncio.Queue()
            fast_reload, slow_reload = asyncio.Event(), asyncio.Event()
            fast_reload.set()  # web-1 applies configs instantly; web-2 is stuck for now
            tasks = [
                asyncio.create_task(watcher(client, "web-1", fast_seen, fast_reload)),
                asyncio.create_task(watcher(client, "web-2", slow_seen, slow_reload)),
            ]
            await fast_seen.get()
            await slow_seen.get()

            changes: list[dict[str, object]] = [
                {"log_level": "debug"},
                {"pool_size": 8},
                {"log_level": "warning"},
            ]
            for version, change in enumerate(changes, start=2):
                config = {**config, **change, "version": version}
                print(f"admin: pushing version {version}")
                await semaphore.update(json.dumps(config).encode())
                await fast_seen.get()  # wait until web-1 has it, to keep the output tidy

            slow_reload.set()  # web-2 finishes its slow reload and looks again
            await asyncio.gather(*tasks)
            described = await semaphore.describe()
            print(f"admin: stored config is version {json.loads(described.data)['version']}")


if __name__ == "__main__":
    asyncio.run(main())
