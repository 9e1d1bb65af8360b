"""Leader election with failover: campaign, proclaim, observe, and a lost leader.

Three candidates campaign for "primary"; the first one leads and proclaims the
address it serves on. An observer prints every change of leader. Then the leader's
connection is lost: after its session's recovery window runs out, the session expires,
the old leader's ``async with`` body is cancelled with SessionExpiredError, and the
next candidate in line takes over.

In-process (``memory://``) the time is a FakeClock, so the 2-second recovery window
passes at once. With ``TENURE_URL`` it runs against that server, on the wall clock:
node-a talks to the server through a cable (a TCP forwarder) that is pulled out, a
real network loss, and the failover takes the window itself, about 2 s.

Run it with::

    python examples/election.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/election.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import tenure
from tenure.errors import SessionExpiredError
from tenure.testing import Cable, FakeClock, disconnect

NODE = "election-demo"
RECOVERY_WINDOW = 2.0


async def main() -> None:
    url = os.environ.get("TENURE_URL")
    clock = None if url else FakeClock()
    sessions: dict[str, tenure.Session] = {}
    serving = {name: asyncio.Event() for name in ("node-a", "node-b", "node-c")}

    async with contextlib.AsyncExitStack() as stack:
        if url is None:  # one in-process client for all
            client = await stack.enter_async_context(tenure.connect("memory://", clock=clock))
            cable, clients = None, dict.fromkeys(serving, client)
        else:  # a client per candidate, node-a's through a cable we can pull
            cable = Cable(url)
            a_url = await stack.enter_async_context(cable)
            client = await stack.enter_async_context(tenure.connect(url))
            clients = dict.fromkeys(serving, client)
            clients["node-a"] = await stack.enter_async_context(tenure.connect(a_url))
        await client.create_node(NODE, exist_ok=True)

        async def candidate(name: str, address: str) -> None:
            try:
                async with clients[name].session(
                    NODE, recovery_window=RECOVERY_WINDOW, description=name
                ) as session:
                    sessions[name] = session
                    election = session.election("primary")
                    async with election.campaign(f"{name} (starting)".encode()) as leadership:
                        print(f"{name}: elected, token {leadership.token}")
                        await leadership.proclaim(f"{name} at {address}".encode())
                        serving[name].set()
                        await asyncio.Event().wait()  # serve until leadership ends
            except SessionExpiredError as error:
                # By now the server has already handed leadership on: never act as
                # leader without passing leadership.token to the resources you touch.
                print(f"{name}: stopped serving, {type(error).__name__}: {error}")

        async def observer(started: asyncio.Event) -> None:
            async with client.session(NODE, description="observer") as session:
                async for state in session.election("primary").observe():
                    if state.has_leader:
                        print(f"observer: leader is {state.data.decode()} (token {state.token})")
                    else:
                        print("observer: no leader")
                    started.set()

        observing = asyncio.Event()
        tasks = [asyncio.create_task(observer(observing))]
        await observing.wait()
        # Campaigners are served in arrival order: node-a, then node-b, then node-c.
        for i, name in enumerate(serving, start=1):
            tasks.append(asyncio.create_task(candidate(name, f"10.0.0.{i}:8080")))
            await asyncio.sleep(0.05)  # so that they arrive in this order
        await serving["node-a"].wait()

        # A crash, a partition, a pause: the server keeps node-a's session for its
        # recovery window, then expires it and hands leadership on.
        print("main: node-a's connection drops")
        if cable is not None:
            cable.unplug()  # the wall clock runs the window out
            await asyncio.wait_for(serving["node-b"].wait(), 10 * RECOVERY_WINDOW)
            cable.plug()
        else:
            disconnect(sessions["node-a"])
            assert clock is not None
            await clock.advance(RECOVERY_WINDOW + 1)
            await serving["node-b"].wait()

        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
