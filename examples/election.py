"""Leader election with failover: campaign, proclaim, observe, and a lost leader.

Three candidates campaign for "primary"; the first one leads and proclaims the
address it serves on. An observer prints every change of leader. Then the leader's
connection drops: after its session's recovery window runs out, the session expires,
the old leader's ``async with`` body is cancelled with SessionExpiredError, and the
next candidate in line takes over.

The time here is a FakeClock, so the 5-second recovery window passes at once.

Run it with::

    python examples/election.py
"""

from __future__ import annotations

import asyncio

import tenure
from tenure.errors import SessionExpiredError
from tenure.testing import FakeClock, disconnect

NODE = "election-demo"
RECOVERY_WINDOW = 5.0


async def main() -> None:
    clock = FakeClock()
    sessions: dict[str, tenure.Session] = {}
    serving = {name: asyncio.Event() for name in ("node-a", "node-b", "node-c")}

    async with tenure.connect("memory://", clock=clock) as client:
        await client.create_node(NODE)

        async def candidate(name: str, address: str) -> None:
            try:
                async with client.session(
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
        await serving["node-a"].wait()

        # In production this is a real network loss (a crash, a partition, a pause).
        # The server keeps node-a's session for its recovery window, then expires it.
        print("main: node-a's connection drops")
        disconnect(sessions["node-a"])
        await clock.advance(RECOVERY_WINDOW + 1)
        await serving["node-b"].wait()

        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main())
