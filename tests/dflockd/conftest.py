"""Fixtures of the dflockd tests: real ``tenure serve`` processes and raw line clients.

``server`` is one server per module (``--fsync off``, default lease 7 s) for tests
that only need fresh keys; ``serve(*flags)`` starts a server of the test's own (for
flags, restarts, signals); ``raw`` opens raw dflockd connections (asyncio streams),
all closed at teardown. Every wait is bounded by ``WAIT``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import ssl
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from tests.server.wire import WAIT, ServerProcess

#: The default lease of the module servers (a value no test asks for by itself).
DEFAULT_LEASE = 7
#: A dflockd token of the fencing shape (spec §7).
TOKEN = re.compile(r"[0-9a-f]{32}")

_serial = itertools.count(1)
_run = uuid.uuid4().hex[:6]


def unique(prefix: str = "k") -> str:
    """A key no other test of the run uses."""
    return f"{prefix}-{_run}-{next(_serial)}"


def fence(token: str) -> int:
    """The fence of a token (its first 16 hex digits)."""
    assert TOKEN.fullmatch(token), token
    return int(token[:16], 16)


def grant(line: str, status: str = "ok", lease: int | None = None) -> str:
    """The token of a grant line ``<status> <token> <lease>`` (exactly three fields)."""
    fields = line.split(" ")
    assert len(fields) == 3, line
    assert fields[0] == status, line
    assert TOKEN.fullmatch(fields[1]), line
    if lease is not None:
        assert fields[2] == str(lease), line
    return fields[1]


class Raw:
    """One raw dflockd connection: exact bytes out, exact lines back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await asyncio.wait_for(self.writer.drain(), WAIT)

    async def line(self, timeout: float = WAIT) -> str:
        """The next answer line, without its LF (AssertionError at EOF or a partial line)."""
        raw = await asyncio.wait_for(self.reader.readline(), timeout)
        assert raw.endswith(b"\n"), f"no whole line, got {raw!r}"
        text = raw[:-1].decode()
        assert "\r" not in text, f"a CR in {raw!r}"
        assert text == text.strip(), f"stray white space in {raw!r}"
        return text

    async def ask(self, command: str, key: str = "_", argument: str = "_") -> str:
        """Send one request; its one answer line."""
        await self.send(f"{command}\n{key}\n{argument}\n".encode())
        return await self.line()

    async def closed(self) -> bool:
        """Whether the server closed the connection (reads to EOF, within WAIT)."""
        try:
            rest = await asyncio.wait_for(self.reader.read(65536), WAIT)
        except ConnectionError:
            return True
        assert rest == b"", f"expected the end of the stream, got {rest!r}"
        return True

    async def rest(self) -> bytes:
        """Everything the server sends until it closes the connection (within WAIT)."""
        data = b""
        async with asyncio.timeout(WAIT):
            while True:
                try:
                    chunk = await self.reader.read(65536)
                except ConnectionError:
                    return data
                if not chunk:
                    return data
                data += chunk

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError, TimeoutError, ssl.SSLError):
            await asyncio.wait_for(self.writer.wait_closed(), WAIT)


class Raws:
    """Every Raw a test opened, closed at its end."""

    def __init__(self) -> None:
        self.opened: list[Raw] = []

    async def connect(self, port: int, *, tls: ssl.SSLContext | None = None) -> Raw:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=tls, limit=2**20), WAIT
        )
        raw = Raw(reader, writer)
        self.opened.append(raw)
        return raw

    async def close_all(self) -> None:
        for raw in self.opened:
            await raw.close()


@pytest.fixture
async def raw() -> AsyncIterator[Raws]:
    """Raw dflockd connections; every one is closed at teardown."""
    raws = Raws()
    try:
        yield raws
    finally:
        await raws.close_all()


def server_args(*flags: str) -> tuple[str, ...]:
    """The flags of a test server: ``--fsync off`` and the test lease, then ``flags``."""
    return ("--fsync", "off", "--dflockd-default-lease", str(DEFAULT_LEASE), *flags)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the module's tests that need nothing but fresh keys."""
    data = tmp_path_factory.mktemp("dflockd") / "data"
    with ServerProcess(data, *server_args()) as process:
        yield process


Serve = Callable[..., ServerProcess]


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Serve]:
    """``serve(*flags, data_dir=None)``: a server of this test's own, killed at teardown."""
    started: list[ServerProcess] = []
    counter = itertools.count()

    def start(*flags: str, data_dir: Path | None = None) -> ServerProcess:
        where = data_dir if data_dir is not None else tmp_path / f"data{next(counter)}"
        process = ServerProcess(where, *server_args(*flags))
        started.append(process)
        process.wait_listening()
        return process

    try:
        yield start
    finally:
        for process in started:
            process.kill()


@dataclass
class Pki:
    """A CA and the server certificate files it signed."""

    ca: trustme.CA
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    base = tmp_path_factory.mktemp("dflockd-pki")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = base / "server.pem", base / "server.key"
    for blob in leaf.cert_chain_pems:
        blob.write_to_path(str(cert), append=True)
    leaf.private_key_pem.write_to_path(str(key))
    return Pki(ca, cert, key)


#: Secrets of the auth file ``auth_file`` writes.
SECRET = "dflockd-secret-1"
READ_ONLY_SECRET = "dflockd-reader-2"
NARROW_SECRET = "dflockd-narrow-3"


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    """An auth file: a read-write token, a read-only one, one limited to other nodes."""
    path = tmp_path / "auth.toml"
    path.write_text(
        f"""
[[token]]
name = "writer"
secret = "{SECRET}"
access = "read-write"

[[token]]
name = "reader"
secret = "{READ_ONLY_SECRET}"
access = "read-only"

[[token]]
name = "narrow"
secret = "{NARROW_SECRET}"
access = "read-write"
nodes = ["jobs"]
"""
    )
    return path
