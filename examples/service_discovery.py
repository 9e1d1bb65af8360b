"""Service discovery: instances register in an ephemeral semaphore, a client watches.

Each instance of a service holds one token of the ephemeral semaphore "endpoints",
with its address as owner data. Nobody creates the semaphore: the first acquire with
``ephemeral=True`` does, and it vanishes when its last owner leaves. A client
watches the owners and prints the live endpoint list as instances come and go.

An instance that crashes instead of leaving disappears the same way, once its
session's recovery window has passed.

Run it with::

    python examples/service_discovery.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/service_discovery.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable

import tenure

NODE = "discovery-demo"


async def instance(client: tenure.Client, address: str, leave: asyncio.Event) -> None:
    async with client.session(NODE, description=address) as session:
        endpoints = session.semaphore("endpoints")
        async with endpoints.acquire(1, data=address.encode(), ephemeral=True):
            print(f"{address}: registered")
            await leave.wait()  # serve requests until told to stop
            print(f"{address}: leaving")
        # Leaving the block released the token: the client sees this endpoint go.


async def main() -> None:
    addresses = ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]
    leave = {address: asyncio.Event() for address in addresses}

    async with tenure.connect(os.environ.get("TENURE_URL", "memory://")) as client:
        await client.create_node(NODE)
        tasks: list[asyncio.Task[None]] = []

        def start(address: str) -> None:
            tasks.append(asyncio.create_task(instance(client, address, leave[address])))

        # The script of this demo, one step per change the client sees: three
        # instances come up, then they go away again, the first one first.
        steps: list[Callable[[], None]] = [functools.partial(start, a) for a in addresses]
        steps += [leave[a].set for a in addresses]

        async with client.session(NODE, description="client") as session:
            seen: tuple[bool, list[str]] | None = None
            # The first state comes at once; later ones after each change (changes
            # made while we process one state are merged: we always get the latest).
            async for state in session.semaphore("endpoints").watch(owners=True):
                live = sorted(owner.data.decode() for owner in state.owners)
                if (state.exists, live) == seen:
                    continue
                seen = (state.exists, live)
                print(f"client: exists={state.exists} endpoints={live}")
                if not steps:
                    break
                steps.pop(0)()

        await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main())
