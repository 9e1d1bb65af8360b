"""The ``CoordinationService/Session`` call: one stream from its SessionStart to its end.

:class:`SessionCalls` serves each Session stream of the YDB face and keeps the ones
open now. A stream is refused at once (a ``Failure``) when its ticket is bad, the
server is stopping or ``--max-connections`` streams are open; it must send its
SessionStart within ``--handshake-timeout``; on a standby (or a leader stepping down)
it ends gRPC ``UNAVAILABLE`` once that start is read
(:func:`~tenure.compat.ydb.services.lead_or_leave`). Then its requests are read and
handed to :class:`~tenure.compat.ydb.sessions.YdbSessions` (what each means), its
answers written by the server's outboxes (:mod:`.pipe`), until either side ends it.

The face's stop and abort end the streams from here (:meth:`SessionCalls.stop`,
:meth:`SessionCalls.abort`), and wait until none is open (:attr:`SessionCalls.idle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any, Final

import grpc
from google.protobuf.message import DecodeError

from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.directory import Directory
from tenure.compat.ydb.metrics import YdbCounts
from tenure.compat.ydb.services import lead_or_leave
from tenure.compat.ydb.sessions import YdbSessions
from tenure.compat.ydb.stream import SessionStream
from tenure.compat.ydb.tickets import Tickets, UnauthorizedError
from tenure.server.plug import HostCalls, ServeConfig

log = logging.getLogger("tenure.server")

#: Why a Session stream ends when a message cannot be decoded.
_UNDECODABLE: Final = "a message on the Session stream is not a Ydb.Coordination.SessionRequest"
#: Why a stream ends when the face is aborted (a cluster's term ended, or the journal failed).
_ABORTED: Final = "this server stopped serving; discover the database's endpoint again"


class SessionCalls:
    """The Session streams of one YDB face (see the module docstring).

    ``config``: the server's settings (``--handshake-timeout``, ``--max-connections``,
    ``--shutdown-grace``); ``peer(context)``: the client of a call; ``counts``: told
    when a stream's start is refused here (None: not measured).
    """

    def __init__(
        self,
        config: ServeConfig,
        host: HostCalls,
        tickets: Tickets,
        directory: Directory,
        sessions: YdbSessions,
        peer: Callable[[Any], str],
        counts: YdbCounts | None,
    ) -> None:
        self.config = config
        self.host = host
        self.tickets = tickets
        self.directory = directory
        self.sessions = sessions
        self._peer = peer
        self.counts = counts
        #: The streams open now.
        self.streams: set[SessionStream] = set()
        self._opening = 0  # streams not started yet (their first message not read)
        #: Set while no stream is open.
        self.idle = asyncio.Event()
        self.idle.set()
        self.draining = False  # stop() was called: new streams are refused
        self.aborted = False  # abort() was called: streams end UNAVAILABLE

    def stop(self) -> None:
        """The server is stopping: refuse new streams; every open one ends UNAVAILABLE
        (its session detached, not closed: its client re-attaches it to the next run of
        the server within its timeout)."""
        self.draining = True
        for stream in list(self.streams):
            if not stream.closing:
                self.sessions.fail(stream, pb.Status.UNAVAILABLE, "the server is shutting down")

    def tokens_gone(self, names: frozenset[str]) -> int:
        """End the open streams of the tokens ``names`` (removed or rotated by a reload)
        UNAUTHORIZED, their sessions detached; how many."""
        gone = [
            stream
            for stream in self.streams
            if stream.token is not None and stream.token.name in names and not stream.closing
        ]
        for stream in gone:
            assert stream.token is not None
            why = f"token {stream.token.name!r} was removed or rotated in the auth file"
            self.sessions.fail(stream, pb.Status.UNAUTHORIZED, why)
        return len(gone)

    def abort(self) -> None:
        """Drop every stream unanswered: what each was owed is discarded, and its call
        ends gRPC UNAVAILABLE."""
        self.aborted = True
        for stream in self.streams:
            stream.writer.abort()

    async def serve(self, requests: Any, context: Any) -> None:
        """One ``Session`` stream, from its SessionStart to its end.

        A standby reads the SessionStart before it ends the stream UNAVAILABLE: ended
        while the client's first write is on its way, the client's gRPC sees a crossed
        write (INTERNAL, grpc/grpc#36066), which YDB's SDK does not take for "go
        elsewhere"."""
        try:
            token = self.tickets.token_of(context.invocation_metadata(), self._peer(context))
            refusal = self._refusal()
        except UnauthorizedError as error:
            refusal = pb.Status.UNAUTHORIZED, str(error)
        if refusal is not None:
            await context.write(_failure(*refusal))
            return
        self._opening += 1  # (a stream waiting for its start counts against the limit)
        try:
            async with asyncio.timeout(self.config.handshake_timeout):
                first = await context.read()
        except TimeoutError:
            why = f"no SessionStart within {self.config.handshake_timeout:g} s"
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, why)
        except DecodeError:  # (grpc would end the call UNKNOWN, naming the exception)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _UNDECODABLE)
        finally:
            self._opening -= 1
        if first is grpc.aio.EOF:
            return
        # (the term may have ended meanwhile)
        await lead_or_leave(self.directory, self.counts, "session", context)
        if first.WhichOneof("request") != "session_start":
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "First message must be a SessionStart"
            )
        stream = SessionStream(self._peer(context), token)
        self.streams.add(stream)
        self.idle.clear()
        try:
            try:
                self.sessions.start(stream, first.session_start)
                await self._serve(stream, context)
            finally:
                stream.writer.gone = True
                if not stream.closing:  # the call was cancelled (its client vanished)
                    self.sessions.end(stream)
                self.streams.discard(stream)
            if self.aborted:  # (said before the listener stops: idle is set after it)
                await context.abort(grpc.StatusCode.UNAVAILABLE, _ABORTED)
            if stream.writer.aborted:
                await context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "the client does not read its answers"
                )
        finally:
            if not self.streams:
                self.idle.set()

    def _refusal(self) -> tuple[int, str] | None:
        """Why a new stream is refused at once (a Failure), or None."""
        if self.draining or self.host.dead:
            return pb.Status.UNAVAILABLE, "the server is shutting down"
        if len(self.streams) + self._opening >= self.config.max_connections:
            return (
                pb.Status.OVERLOADED,
                f"max_connections ({self.config.max_connections}) streams are open",
            )
        return None

    async def _serve(self, stream: SessionStream, context: Any) -> None:
        """Read the stream's requests and write its answers, until one side ends it."""
        reader = asyncio.ensure_future(self._read(stream, context))
        sender = asyncio.ensure_future(stream.writer.drain(context))
        try:
            await asyncio.wait((reader, sender), return_when=asyncio.FIRST_COMPLETED)
            if reader.done() and not sender.done():
                if not stream.closing:  # the client hung up: the session waits for it
                    self.sessions.end(stream)
                with contextlib.suppress(TimeoutError):  # what it is owed, then done
                    async with asyncio.timeout(self.config.shutdown_grace):
                        await asyncio.shield(sender)
        finally:
            for task in (reader, sender):
                task.cancel()
            await asyncio.gather(reader, sender, return_exceptions=True)

    async def _read(self, stream: SessionStream, context: Any) -> None:
        while not stream.closing:
            try:
                request = await context.read()
            except DecodeError:
                self.sessions.fail(stream, pb.Status.BAD_REQUEST, _UNDECODABLE)
                return
            if request is grpc.aio.EOF:
                return
            await self.host.caught_up()  # (a mass expiry's slices first: --step-budget)
            try:
                self.sessions.handle(stream, request)
            except Exception:  # a bug must cost this stream, never the server
                log.exception("ydb: a session request failed unexpectedly")
                self.sessions.fail(stream, pb.Status.INTERNAL_ERROR, "internal error")


def _failure(status: int, why: str) -> bytes:
    response = pb.coordination.SessionResponse(failure={"status": status, "issues": pb.issues(why)})
    return bytes(response.SerializeToString())
