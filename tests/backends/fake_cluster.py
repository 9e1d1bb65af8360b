"""Scripted in-process members of a ``tenure serve --cluster``, for the client's tests.

A :class:`FakeMember` is a small asyncio server that speaks the native protocol
through the real codec (:class:`~tenure._protocol.ServerConnection`) and plays one
part, which a test changes as it goes: the **leader** serves requests on a
:class:`~tenure._runtime.host.Host` (a real engine) that the members of one
:class:`FakeCluster` share, as a cluster's members share one state and one
instance id; a **standby** greets a version-3 to -7 client with ``role="standby"`` and the
leader's address, refuses an older Hello ``NOT_LEADER``, and answers every request
but ClusterStatus ``Failure(NOT_LEADER)``; a **standalone** server serves requests
and answers ClusterStatus ``UNSUPPORTED``. A **silent** member (``silent = True``)
answers nothing, as a stopped process whose sockets still accept; a **deaf** one
(``deaf = True``) answers Hellos and Pings but no request, as a server whose
requests hang (each is still recorded in ``requests``). ``versions``
makes it an older server, which refuses a newer Hello ``UNSUPPORTED``.

Sessions are kept as the real server keeps them: the connection that creates,
attaches or resumes one receives its pushes, and a lost connection detaches the
sessions still attached to it (their windows counted from then).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any

from tenure._core import (
    AttachSession,
    Command,
    CreateSession,
    DetachSession,
    Effect,
    Engine,
    ResumeSession,
    SessionInfo,
)
from tenure._protocol import (
    NEED_DATA,
    ConnectionClosed,
    Failure,
    GoingAway,
    Hello,
    Ping,
    Pong,
    Push,
    Refused,
    Reply,
    Request,
    ServerConnection,
    Welcome,
)
from tenure._protocol.cluster import ClusterStatus, ClusterView, MemberView
from tenure._protocol.messages import LEADER, STANDALONE, STANDBY, SUPPORTED_VERSIONS
from tenure._runtime.clock import LoopClock
from tenure._runtime.host import Host
from tenure.errors import ErrorCode, TenureError, code_of

__all__ = ["FakeCluster", "FakeMember"]


class FakeCluster:
    """The state the members share: one engine (a Host), one instance id."""

    def __init__(self, instance_id: bytes = b"c" * 16) -> None:
        self.host = Host(Engine(), LoopClock())
        self.instance_id = instance_id
        self.term = 1
        #: session id -> the connection it is attached to (over every member).
        self.owners: dict[int, _Conn] = {}

    def view(self, members: Iterable[FakeMember], answered_by: str) -> ClusterView:
        """The cluster as ClusterStatus shows it: members, leader, term, log index."""
        listed = list(members)
        leader = next((m.name for m in listed if m.role == LEADER), "")
        index = 100
        return ClusterView(
            cluster="fake",
            leader=leader,
            term=self.term if leader else 0,
            index=index,
            answered_by=answered_by,
            members=tuple(
                MemberView(m.name, m.role, m.address, index - m.lag, age=0.5) for m in listed
            ),
        )

    def close(self) -> None:
        """Stop the engine's timer."""
        self.host.close()


class FakeMember:
    """One scripted server (see the module docstring); ``start`` it, ``close`` it."""

    def __init__(
        self,
        name: str,
        cluster: FakeCluster,
        *,
        role: str = LEADER,
        leader: str | None = None,
        versions: Iterable[int] = SUPPORTED_VERSIONS,
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.role = role
        #: The leader a standby names (its address, ``HOST:PORT``).
        self.leader = leader
        self.versions = frozenset(versions)
        #: How far behind the log the member is, as its ClusterView says.
        self.lag = 0
        #: Every member, for ClusterStatus (set by the test; default: itself).
        self.peers: list[FakeMember] = [self]
        #: The version of every Hello received, in order.
        self.hellos: list[int] = []
        #: The token of every Hello received, in order.
        self.tokens: list[str | None] = []
        #: The type name of every request received, in order.
        self.requests: list[str] = []
        #: Whether it answers nothing (a stopped process: what it receives is dropped).
        self.silent = False
        #: Whether it answers Hellos and Pings but no request (what it reads is recorded).
        self.deaf = False
        self._server: asyncio.Server | None = None
        self._conns: set[_Conn] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def port(self) -> int:
        """The port it listens on."""
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, as the member advertises itself."""
        return f"127.0.0.1:{self.port}"

    async def start(self) -> FakeMember:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        """Stop listening and drop every connection (as a crash would)."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.writer.transport.abort()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._server is not None:
            await self._server.wait_closed()

    def step_down(self, leader: str | None) -> None:
        """Stop leading: GoingAway(NOT_LEADER) naming ``leader`` on every connection."""
        self.role, self.leader = STANDBY, leader
        for conn in list(self._conns):
            if conn.open:
                conn.send(GoingAway(ErrorCode.NOT_LEADER, f"leader={leader or ''} (stepped down)"))
            conn.writer.close()

    # -- one connection -------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = _Conn(self, writer)
        self._conns.add(conn)
        try:
            while not writer.is_closing():
                data = await reader.read(65536)
                conn.codec.receive_data(data)
                while (event := conn.codec.next_event()) is not NEED_DATA:
                    if isinstance(event, ConnectionClosed):
                        return
                    if not self.silent:
                        self._handle(conn, event)
                if not data:
                    return
        except (ConnectionError, TenureError):
            pass
        finally:
            self._conns.discard(conn)
            conn.detach_all()
            writer.close()
            self._tasks.discard(task)

    def _handle(self, conn: _Conn, event: Any) -> None:
        if isinstance(event, Hello):
            self._greet(conn, event)
        elif isinstance(event, Ping):
            conn.send(Pong(event.nonce))
        elif isinstance(event, Request):
            self.requests.append(type(event.command).__name__)
            if not self.deaf:
                self._answer(conn, event)

    def _greet(self, conn: _Conn, hello: Hello) -> None:
        self.hellos.append(hello.version)
        self.tokens.append(hello.token)
        if hello.version not in self.versions:
            speaks = ", ".join(map(str, sorted(self.versions)))
            why = f"protocol version {hello.version} is not supported; this server speaks {speaks}"
            conn.send(Refused(ErrorCode.UNSUPPORTED, why))
            conn.writer.close()
        elif self.role == STANDBY and hello.version < 3:
            why = f"leader={self.leader or ''} (this server is a standby)"
            conn.send(Refused(ErrorCode.NOT_LEADER, why))
            conn.writer.close()
        else:
            leader = self.address if self.role == LEADER else self.leader
            conn.send(
                Welcome(
                    version=hello.version,
                    server_name=self.name,
                    instance_id=self.cluster.instance_id,
                    role=self.role,
                    leader=None if self.role == STANDALONE else leader,
                )
            )
            conn.open = True

    def _answer(self, conn: _Conn, request: Request) -> None:
        command = request.command
        if isinstance(command, ClusterStatus):
            if self.role == STANDALONE:
                why = "this server is not part of a cluster (tenure serve --cluster)"
                conn.send(Failure(request.request_id, ErrorCode.UNSUPPORTED, why))
            else:
                view = self.cluster.view(self.peers, self.name)
                conn.send(Reply(request.request_id, view))
            return
        if self.role == STANDBY:
            why = f"leader={self.leader or ''} (this server is a standby)"
            conn.send(Failure(request.request_id, ErrorCode.NOT_LEADER, why))
            return
        try:
            value = conn.execute(command)
        except TenureError as error:
            conn.send(Failure(request.request_id, code_of(error), str(error)))
            return
        conn.send(Reply(request.request_id, value))


class _Conn:
    """One client connection of a member: its codec, and the sessions attached to it."""

    def __init__(self, member: FakeMember, writer: asyncio.StreamWriter) -> None:
        self.member = member
        self.writer = writer
        self.codec = ServerConnection()
        self.open = False
        self.sink = self.push  # one object: the host tells sinks apart by identity

    def send(self, message: Any) -> None:
        """Write ``message`` (nothing once the connection is closing)."""
        if not self.writer.is_closing():
            self.writer.write(self.codec.send(message))

    def push(self, effect: Effect) -> None:
        """An effect of a session attached here."""
        self.send(Push(effect))

    def execute(self, command: Command[Any]) -> Any:
        """Apply ``command`` on the shared engine; route the session it attaches here."""
        cluster = self.member.cluster
        host = cluster.host
        attaching = (
            command.session_id if isinstance(command, AttachSession | ResumeSession) else None
        )
        if attaching is not None:  # (pushes queued while detached come before the reply)
            host.subscribe(attaching, self.sink)
        try:
            value = host.execute(command)
        except BaseException:
            if attaching is not None and cluster.owners.get(attaching) is not self:
                host.unsubscribe(attaching, self.sink)
            raise
        if isinstance(command, CreateSession | AttachSession | ResumeSession):
            assert isinstance(value, SessionInfo)
            cluster.owners[value.session_id] = self
            host.subscribe(value.session_id, self.sink)
        return value

    def detach_all(self) -> None:
        """The connection is gone: detach the sessions still attached to it."""
        cluster = self.member.cluster
        for session_id, owner in list(cluster.owners.items()):
            if owner is self:
                del cluster.owners[session_id]
                cluster.host.unsubscribe(session_id, self.sink)
                with contextlib.suppress(TenureError):
                    cluster.host.execute(DetachSession(session_id, 0.0))
