"""A cable to pull: a TCP forwarder between one client and its server.

Failover code is tested best against a real server and a real network loss: a
client whose connection dies without a goodbye keeps its session for the recovery
window, then the server expires it. :class:`Cable` makes that loss on demand::

    cable = Cable("tenure://127.0.0.1:6388")
    async with cable as through, tenure.connect(through) as client:
        ...
        cable.unplug()  # the server hears nothing more from this client
        ...
        cable.plug()  # and new connections get through again

It forwards whatever the URL's scheme speaks (it only copies bytes), to the URL's
one host and port.
"""

from __future__ import annotations

import asyncio
import urllib.parse

__all__ = ["Cable"]


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
                async with asyncio.TaskGroup() as pumps:
                    pumps.create_task(self._pump(reader, up_writer))
                    pumps.create_task(self._pump(up_reader, writer))
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
