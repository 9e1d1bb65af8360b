"""The server makes the faces its settings turn on, through the face registry.

A real :class:`~tenure.server._serve.Server` in this process, with real sockets: the
faces the registry makes for a configuration, a server given none (the main port is
then native only), one given two faces that would both take the main port, and one
whose listening face cannot bind its port (nothing is left listening). The registry's
own reading of the faces is ``test_face_registry.py``'s.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tenure._core import CreateNode
from tenure.compat.dflockd.face import DflockdFace
from tenure.compat.ydb.settings import YdbSettings
from tenure.server import DataDir, Journal
from tenure.server._config.serve_config import ServeConfig
from tenure.server._reception import listening_sockets
from tenure.server._serve import Server
from tenure.server._server_host import wal_host
from tenure.server.plug import FaceFactory

from .wire import WAIT, Clients, bound, free_port

pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def serving(
    path: Path, faces: Mapping[str, FaceFactory] | None, **settings: object
) -> AsyncIterator[tuple[Server, int]]:
    """A Server on a fresh data directory with ``faces`` (None: the registry's), started
    (its port), stopped at the end."""
    journal = Journal(DataDir(path))
    engine = journal.open(asyncio.get_running_loop().time())
    config = ServeConfig(**{"port": 0, "data_dir": path, **settings})  # type: ignore[arg-type]
    try:
        server = Server(
            config, wal_host(config, journal, engine), bound(config), b"f" * 16, faces=faces
        )
    except ValueError:
        journal.close()
        raise
    _, port = await server.start()
    try:
        yield server, port
    finally:
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0


async def test_the_registry_makes_dflockd_on_the_main_port(tmp_path: Path) -> None:
    async with serving(tmp_path / "data", None) as (server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"l\nkey\n5\n")  # a dflockd acquire, 5 s timeout
        line = await asyncio.wait_for(reader.readline(), WAIT)
        assert line.startswith(b"ok ")
        assert server.connections() == {"native": 0, "dflockd": 1}
        writer.close()


async def test_without_faces_the_main_port_is_native_only(tmp_path: Path) -> None:
    clients = Clients()
    async with serving(tmp_path / "data", {}) as (server, port):
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"l\nkey\n5\n")
            assert await asyncio.wait_for(reader.read(), WAIT) == b""  # closed, unanswered
            writer.close()
            client = await clients.connect(port)
            assert await client.call(CreateNode("native")) is None
            assert server.connections() == {"native": 1}
        finally:
            await clients.close_all()


async def test_two_faces_cannot_share_the_main_port(tmp_path: Path) -> None:
    twice = {"dflockd": DflockdFace.plugged, "another": DflockdFace.plugged}
    with pytest.raises(ValueError, match="would both take the main port"):
        async with serving(tmp_path / "data", twice):
            pass


async def test_a_face_that_cannot_listen_leaves_nothing_listening(tmp_path: Path) -> None:
    pytest.importorskip("grpc")
    path, main = tmp_path / "data", free_port()
    journal = Journal(DataDir(path))
    engine = journal.open(asyncio.get_running_loop().time())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", free_port()))
        taken.listen()
        ydb = YdbSettings(port=taken.getsockname()[1])
        config = ServeConfig(port=main, data_dir=path, faces={"ydb": ydb})
        sockets = listening_sockets(config)
        server = Server(config, wal_host(config, journal, engine), sockets, b"f" * 16)
        with pytest.raises(OSError, match="cannot listen"):
            await server.start()
    assert server.binding == "ydb"
    sockets.close()  # (as tenure serve does then): the server kept no duplicate open
    with pytest.raises(ConnectionRefusedError):  # the main port is let go of too
        await asyncio.open_connection("127.0.0.1", main)
    with pytest.raises(OSError, match="not open"):
        journal.data_dir.sync()  # the server closed the journal
