"""The fenced resource: a tiny service that refuses writes with a stale fencing token.

It stands for the storage a lock protects (Kleppmann's fencing, Chubby's
sequencer): per key it remembers the highest token it accepted and refuses any
write whose token is lower. It runs in the harness process, on a clock no
nemesis touches, and records every write it is asked for (accepted or not) as a
``fence`` note of the harness's history.

Wire format: one JSON object per line each way. Request ``{"key", "token", "p",
"op"}`` (the writing client's process label and its operation id); answer
``{"ok": bool, "high": int}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

from tools.faults.history import Recorder, now

#: The process label of the resource's notes.
FENCE = "fence"
#: Bound of any single wait of a client (a paused resource is not a fault we inject).
WAIT = 10.0


class FenceServer:
    """The resource (see the module docstring); ``highest`` maps key to token."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.highest: dict[str, int] = {}
        self.accepted = 0
        self.rejected = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen on 127.0.0.1 (``port`` is set then)."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])

    def write(self, key: str, token: int, process: str, op_id: int) -> bool:
        """Apply one write: accepted unless ``token`` is below the key's highest."""
        high = self.highest.get(key, 0)
        ok = token >= high
        if ok:
            self.highest[key] = token
            self.accepted += 1
        else:
            self.rejected += 1
        fields = {"key": key, "token": token, "writer": process, "op": op_id, "high": high}
        self.recorder.note(FENCE, "fence", t=now(), ok=ok, **fields)
        return ok

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while line := await reader.readline():
                request = json.loads(line)
                ok = self.write(request["key"], request["token"], request["p"], request["op"])
                answer = {"ok": ok, "high": self.highest.get(request["key"], 0)}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        except (OSError, ValueError, KeyError):
            pass  # a worker killed mid-line, or a broken request: that connection ends
        finally:
            self._writers.discard(writer)
            writer.close()

    async def aclose(self) -> None:
        """Stop listening and close every connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        if self._server is not None:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WAIT):
                    await self._server.wait_closed()


class FenceClient:
    """A worker's connection to the resource (one per client, opened on first use)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def write(self, key: str, token: int, process: str, op_id: int) -> bool:
        """Ask the resource to accept a write with ``token``; whether it did.

        Raises OSError or TimeoutError if the answer does not come (the write may or
        may not have been applied); the connection is then made again next time.
        """
        if self._streams is None:
            async with asyncio.timeout(WAIT):
                self._streams = await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = self._streams
        request = {"key": key, "token": token, "p": process, "op": op_id}
        try:
            writer.write(json.dumps(request).encode() + b"\n")
            async with asyncio.timeout(WAIT):
                line = await reader.readline()
            if not line:
                raise ConnectionResetError("the fenced resource closed the connection")
            return bool(json.loads(line)["ok"])
        except BaseException:
            # Cancelled or broken mid-request: the next answer on this connection
            # would be this one's, so never reuse it.
            self._streams = None
            writer.transport.abort()
            raise

    def write_blocking(self, key: str, token: int, process: str, op_id: int) -> bool:
        """:meth:`write` from a thread: its own short connection, blocking, bounded."""
        request = {"key": key, "token": token, "p": process, "op": op_id}
        with socket.create_connection(("127.0.0.1", self.port), timeout=WAIT) as sock:
            sock.sendall(json.dumps(request).encode() + b"\n")
            line = sock.makefile("rb").readline()
        if not line:
            raise ConnectionResetError("the fenced resource closed the connection")
        return bool(json.loads(line)["ok"])

    def close(self) -> None:
        """Drop the connection."""
        if self._streams is not None:
            self._streams[1].transport.abort()
            self._streams = None
