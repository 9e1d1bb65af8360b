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
import urllib.parse

import tenure
from tenure.errors import SessionExpiredError
from tenure.testing import FakeClock, disconnect

NODE = "election-demo"
RECOVERY_WINDOW = 2.0


class Cable:
    """A TCP forwarder between one client and the server, to pull out like a cable.

    A real network loss for a real server: :meth:`unplug` cuts the open connections
    and closes new ones at once, so the server hears nothing more from the client.
    """

    def __init__(self, url: str) -> None:
        self._url = urllib.parse.urlsplit(url)
        self._plugged = True
        self._pipes: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        """Start forwarding; the URL that goes through the cable."""
        self._server = await asyncio.start_server(self._connected, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        user = self._url.netloc.rpartition("@")[0]
        netloc = f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}"
        return self._url._replace(netloc=netloc).geturl()

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self.unplug()  # every forwarding task ends with its connections
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        await self._server.wait_closed()

    def unplug(self) -> None:
        """Cut every connection now and refuse new ones, until :meth:`plug`."""
        self._plugged = False
        for writer in self._pipes:
            writer.transport.abort()

    def plug(self) -> None:
        """Let connections through again."""
        self._plugged = True

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if not self._plugged:
                return
            host, port = self._url.hostname, self._url.port
            up_reader, up_writer = await asyncio.open_connection(host, port)
            self._pipes |= {writer, up_writer}
            try:
                async with asyncio.TaskGroup() as group:
                    group.create_task(self._pump(reader, up_writer))
                    group.create_task(self._pump(up_reader, writer))
            finally:
                self._pipes -= {writer, up_writer}
                up_writer.transport.abort()
        except* (ConnectionError, OSError):
            pass  # the cable was pulled, or a side hung up: the connection is over
        finally:
            writer.transport.abort()
            self._tasks.discard(task)

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):  # ends with the connection
            writer.write(data)
            await writer.drain()
        writer.transport.abort()  # one side hung up: so does the other


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
