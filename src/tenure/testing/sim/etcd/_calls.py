"""grpc.aio's channel and calls, simulated: what aetcd's generated stubs and tenure's
etcd client see of a simulated etcd cluster.

A :class:`SimChannel` has what a ``grpc.aio.Channel`` gives the generated stubs
(``unary_unary``, ``stream_stream``, ``unary_stream``, ``close``), so the REAL
``rpc_pb2_grpc`` stubs run over it; it carries them as ``kv``, ``lease``, ``watch``,
``maintenance`` and ``auth``. Requests leave it serialized by the stubs' own
serializers and answers come back as bytes, parsed by their deserializers: nothing
is shared between the client's messages and the cluster's.

Its calls behave as grpc.aio's (grpc/aio/_call.py), where tenure's client looks:

* :class:`SimUnaryCall` (``stub.Range(request, timeout=..., metadata=...)``) starts at
  once; awaited, it gives the response or raises ``grpc.aio.AioRpcError``
  (DEADLINE_EXCEEDED when ``timeout`` passes first, on the caller's clock); a task
  cancelled while awaiting it cancels it (the request may have been applied); on a
  closed channel it raises ``grpc.aio.UsageError``;
* :class:`SimStreamCall` (``stub.Watch(metadata=...)``): ``await write(request)``,
  ``await read()`` or ``async for``, ``cancel()``, ``await done_writing()``. Once it
  ended, ``write()`` raises ``asyncio.InvalidStateError`` ("RPC already finished."),
  ``read()`` the ``AioRpcError`` it ended with, ``asyncio.CancelledError`` after a
  local cancel, ``grpc.aio.EOF`` after an OK end (what arrived before is read
  first); an error end loses what was not read.

Where the calls go is the channel's home (:class:`SimChannelHome`:
:class:`~tenure.testing.sim.etcd._stubs.SimEtcd`), which ends them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any, Final, Protocol

import grpc
from aetcd.rpc import rpc_pb2_grpc

__all__ = [
    "MAX_RECEIVE",
    "SimChannel",
    "SimChannelHome",
    "SimStreamCall",
    "SimUnaryCall",
    "rpc_error",
]

#: gRPC's default limit on the size of an answer a client takes.
MAX_RECEIVE: Final = 4 * 1024 * 1024
_CODE = grpc.StatusCode


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    """The error grpc.aio raises for a call that ended with ``code`` and ``details``."""
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class SimChannelHome(Protocol):
    """What a channel's calls ask of the cluster they reach."""

    def send_unary(self, call: SimUnaryCall) -> None:
        """Carry ``call``'s request to its endpoint; end the call with what comes back."""

    def open_stream(self, call: SimStreamCall) -> None:
        """Open ``call``'s stream on its endpoint (or end it: nobody answers)."""

    def to_server(self, call: SimStreamCall, data: bytes | None) -> None:
        """Carry one message of ``call`` to the cluster (None: the client is done writing)."""

    def hang_up(self, call: SimStreamCall) -> None:
        """The client cancelled ``call``: the cluster's end closes."""


class SimChannel:
    """One client's channel to one ``endpoint`` of a cluster (module docstring);
    answers larger than ``max_receive`` bytes fail, as gRPC's receive limit does."""

    def __init__(
        self, home: SimChannelHome, endpoint: str, max_receive: float, host: str | None = None
    ) -> None:
        self.home, self.endpoint, self.max_receive = home, endpoint, max_receive
        #: The simulated host whose process made it (None: the simulation's own).
        self.host = host
        self.closed = False
        self._calls: dict[SimUnaryCall | SimStreamCall, None] = {}  # open ones, in order
        self.kv = rpc_pb2_grpc.KVStub(self)
        self.lease = rpc_pb2_grpc.LeaseStub(self)
        self.watch = rpc_pb2_grpc.WatchStub(self)
        self.maintenance = rpc_pb2_grpc.MaintenanceStub(self)
        self.auth = rpc_pb2_grpc.AuthStub(self)

    def unary_unary(
        self, method: str, request_serializer: Any = None, response_deserializer: Any = None,
        _registered_method: bool = False,
    ) -> Callable[..., SimUnaryCall]:  # fmt: skip
        """A unary method's callable (what a generated stub keeps)."""

        def call(request: Any, *, timeout: float | None = None, **options: Any) -> SimUnaryCall:
            data = request_serializer(request)
            return SimUnaryCall(self, method, data, response_deserializer, timeout)

        return call

    def stream_stream(
        self, method: str, request_serializer: Any = None, response_deserializer: Any = None,
        _registered_method: bool = False,
    ) -> Callable[..., SimStreamCall]:  # fmt: skip
        """A bidirectional stream method's callable."""

        def call(request_iterator: Any = None, **options: Any) -> SimStreamCall:
            return SimStreamCall(self, method, request_serializer, response_deserializer)

        return call

    #: (Maintenance.Snapshot's kind: a stream the cluster does not serve.)
    unary_stream = stream_stream

    async def close(self, grace: float | None = None) -> None:
        """Close: every call still open is cancelled, as grpc.aio's close does."""
        self.closed = True
        for call in list(self._calls):
            call.cancel()

    def _track(self, call: SimUnaryCall | SimStreamCall) -> None:
        self._calls[call] = None

    def _untrack(self, call: SimUnaryCall | SimStreamCall) -> None:
        self._calls.pop(call, None)

    def calls(self) -> list[SimUnaryCall | SimStreamCall]:
        """Its calls still open, in the order they were made."""
        return list(self._calls)


class SimUnaryCall:
    """One unary call under way (grpc.aio's UnaryUnaryCall: awaitable, cancellable)."""

    def __init__(
        self,
        channel: SimChannel,
        method: str,
        request: bytes,
        deserializer: Any,
        timeout: float | None,
    ) -> None:
        self.channel, self.endpoint = channel, channel.endpoint
        self.method, self.request = method, request
        self._deserializer = deserializer
        self._answer: bytes | None = None
        self._error: BaseException | None = None
        self._cancelled = False
        self._ended = asyncio.Event()
        self._deadline: asyncio.TimerHandle | None = None
        if timeout is not None:  # (on the caller's clock, in its context: gRPC's deadline)
            self._deadline = asyncio.get_running_loop().call_later(timeout, self._too_late)
        if channel.closed:
            self.finish(None, grpc.aio.UsageError("Channel is closed."))
        else:
            channel._track(self)
            channel.home.send_unary(self)

    def __await__(self) -> Generator[Any, None, Any]:
        return self._outcome().__await__()

    async def _outcome(self) -> Any:
        try:
            await self._ended.wait()
        except asyncio.CancelledError:
            self.cancel()  # (grpc.aio's: the awaiting task's cancel is the call's)
            raise
        if self._cancelled:
            raise asyncio.CancelledError()
        if self._error is not None:
            raise self._error
        return self._deserializer(self._answer)

    def finish(self, answer: bytes | None, error: BaseException | None) -> None:
        """The call ended (its first end counts): with ``answer``, or ``error``."""
        if self._ended.is_set():
            return
        self._answer, self._error = answer, error
        if self._deadline is not None:
            self._deadline.cancel()
        self.channel._untrack(self)
        self._ended.set()

    def _too_late(self) -> None:
        self.finish(None, rpc_error(_CODE.DEADLINE_EXCEEDED, "Deadline Exceeded"))

    def cancel(self) -> bool:
        """Cancel the call (False: it had ended)."""
        if self._ended.is_set():
            return False
        self._cancelled = True
        self.finish(None, None)
        return True

    def done(self) -> bool:
        """Whether the call ended."""
        return self._ended.is_set()

    def cancelled(self) -> bool:
        """Whether it was cancelled."""
        return self._cancelled


class SimStreamCall:
    """One bidirectional stream (grpc.aio's StreamStreamCall; module docstring)."""

    def __init__(
        self, channel: SimChannel, method: str, serializer: Any, deserializer: Any
    ) -> None:
        self.channel, self.endpoint, self.method = channel, channel.endpoint, method
        self._serializer, self._deserializer = serializer, deserializer
        self._inbox: deque[bytes] = deque()
        self._status: tuple[grpc.StatusCode, str] | None = None
        self._cancelled = self._half_closed = False
        self._changed = asyncio.Event()
        self._unusable = channel.closed  # (made on a closed channel: grpc.aio refuses it)
        if self._unusable:
            self._status = (_CODE.CANCELLED, "Channel is closed.")
        else:
            channel._track(self)
            channel.home.open_stream(self)

    async def write(self, request: Any) -> None:
        """Send ``request`` on the stream."""
        if self._unusable:
            raise grpc.aio.UsageError("Channel is closed.")
        if self._status is not None:
            raise asyncio.InvalidStateError("RPC already finished.")
        if self._half_closed:
            raise asyncio.InvalidStateError('RPC is half closed after calling "done_writing".')
        self.channel.home.to_server(self, self._serializer(request))
        await asyncio.sleep(0)  # (a write hands the message over: the loop turns)

    async def done_writing(self) -> None:
        """No more writes (nothing if the stream ended)."""
        if self._status is None and not self._half_closed:
            self._half_closed = True
            self.channel.home.to_server(self, None)

    async def read(self) -> Any:
        """The next response; ``grpc.aio.EOF`` once the stream ended well."""
        if self._unusable:
            raise grpc.aio.UsageError("Channel is closed.")
        while True:
            status = self._status
            if self._inbox and (status is None or status[0] == _CODE.OK):
                return self._deserializer(self._inbox.popleft())
            if status is not None:
                if self._cancelled:
                    raise asyncio.CancelledError()
                if status[0] == _CODE.OK:
                    return grpc.aio.EOF
                raise rpc_error(*status)
            self._changed.clear()
            try:
                await self._changed.wait()
            except asyncio.CancelledError:
                self.cancel()  # (grpc.aio's: a read cancelled cancels the call)
                raise

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._responses()

    async def _responses(self) -> AsyncIterator[Any]:
        while (response := await self.read()) is not grpc.aio.EOF:
            yield response

    def cancel(self) -> bool:
        """Cancel the stream (False: it had ended)."""
        if self._status is not None:
            return False
        self._cancelled = True
        self.end(_CODE.CANCELLED, "Locally cancelled by application!")
        self.channel.home.hang_up(self)
        return True

    def done(self) -> bool:
        """Whether the stream ended."""
        return self._status is not None

    def cancelled(self) -> bool:
        """Whether it was cancelled here."""
        return self._cancelled

    async def code(self) -> grpc.StatusCode:
        """Its status code, once it ended."""
        while self._status is None:
            self._changed.clear()
            await self._changed.wait()
        return self._status[0]

    def deliver(self, data: bytes) -> None:
        """A response arrived (the cluster's side)."""
        if self._status is None:
            self._inbox.append(data)
            self._changed.set()

    def end(self, code: grpc.StatusCode, details: str) -> None:
        """The stream ended with ``code``: what was not read is lost, but for an OK end."""
        if self._status is not None:
            return
        self._status = (code, details)
        if code != _CODE.OK:
            self._inbox.clear()
        self.channel._untrack(self)
        self._changed.set()
