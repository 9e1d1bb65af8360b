"""The connection to Redis: the function library, calls, their errors and retries.

Every operation is one function of the library in ``lua/`` (its parts joined) (``FCALL``), loaded
once per server under a name that carries the hash of its code, so clients of two
tenure versions never call each other's functions. A server that lost its functions
(restarted without persistence) gets them loaded again on the first call that
misses one.

Function calls go over one pipelined connection of our own (:mod:`._pipe`), not
through redis-py's ``Redis.execute_command`` and its pool: a call is one packed
``FCALL`` written and its answer parsed, without the per-command retry wrapper,
observability hooks, event dispatch, checkout lock and timeout task (most of a
call's client CPU otherwise), and calls made at once share a write. Other commands
(the inbox's trims, listings' scans, ``INFO``) use redis-py's client as usual.

A call whose connection fails raises :class:`~tenure.errors.UnavailableError`;
:meth:`RedisFunctions.retrying` sends it again (same arguments, so the same request
key: the server answers a retried change as it answered the first try) until its
deadline.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import partial
from importlib.resources import files
from typing import Any, Final

import redis.asyncio as aioredis
from redis import exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from tenure._core.limits import (
    MAX_DEADLOCK_LINKS,
    MAX_DEADLOCK_NAME_BYTES,
    MAX_DEADLOCKS_SHOWN,
)
from tenure.backends.redis._pipe import RedisPipe
from tenure.backends.redis._url import RedisOptions
from tenure.errors import PermissionDeniedError, TenureError, UnavailableError, error_from_code

__all__ = ["LIBRARY", "LIMITS", "VERSION", "RedisFunctions", "FunctionReply"]

_PARTS: Final = files("tenure.backends.redis").joinpath("lua")
#: The engine's fixed limits the library keeps too, each written ``@NAME@`` in ``lua/``
#: (its name in :mod:`tenure._core.limits`): one value, stated there, for both.
LIMITS: Final[Mapping[str, int]] = {
    "MAX_DEADLOCKS_SHOWN": MAX_DEADLOCKS_SHOWN,
    "MAX_DEADLOCK_LINKS": MAX_DEADLOCK_LINKS,
    "MAX_DEADLOCK_NAME_BYTES": MAX_DEADLOCK_NAME_BYTES,
}
_LIMIT: Final = re.compile(r"@(MAX_[A-Z_]+)@")
#: The library's source: the parts in ``lua/``, joined in name order, the limits in it.
_SOURCE: Final = _LIMIT.sub(
    lambda found: str(LIMITS[found[1]]),
    "\n".join(
        part.read_text("utf-8")
        for part in sorted(_PARTS.iterdir(), key=lambda part: part.name)
        if part.name.endswith(".lua")
    ),
)
#: The library's version: the hash of its code, limits included (in every function's name).
VERSION: Final = hashlib.sha1(_SOURCE.encode()).hexdigest()[:12]
#: The library's code, as loaded.
LIBRARY: Final = _SOURCE.replace("@V@", VERSION)

#: Shortest and longest pause between two tries of a call that could not reach Redis.
RETRY_MIN: Final = 0.05
RETRY_MAX: Final = 1.0
#: Each operation's function name (the library's version in it), made once.
FUNCTIONS: Final[dict[str, str]] = {}


def function_name(op: str) -> str:
    """The library's function for operation ``op``."""
    name = FUNCTIONS.get(op)
    if name is None:
        name = FUNCTIONS[op] = f"tenure_{VERSION}_{op}"
    return name


_TENURE_ERROR = re.compile(r"^TENURE (\d+) (.*?)(?: script: \S+, on @user_function:\d+\.)?$", re.S)
_CONNECTION_ERRORS: Final = (rexc.ConnectionError, rexc.TimeoutError, OSError)


class FunctionReply:
    """One function's answer: the result, the server's time, when the next deadline is
    due, and what it pushed to the caller's inbox."""

    __slots__ = ("next_due", "now", "pushes", "result")

    def __init__(self, raw: Sequence[Any]) -> None:
        self.now = float(raw[0])
        self.next_due = float(raw[1]) if raw[1] else None
        self.result: Any = raw[2]
        #: What the call pushed to the caller's own inbox (flat field lists).
        self.pushes: Sequence[Sequence[bytes]] = raw[3] if len(raw) > 3 else ()


def _error(error: rexc.ResponseError) -> BaseException:
    text = str(error)
    match = _TENURE_ERROR.match(text)
    if match is None:
        return UnavailableError(f"Redis refused a call: {text}")
    return error_from_code(int(match[1]), match[2])


class RedisFunctions:
    """A pool of connections to one Redis server, calling the library's functions."""

    def __init__(self, options: RedisOptions) -> None:
        self.options = options
        self.client = aioredis.Redis(
            **options.client_kwargs(), retry=Retry(NoBackoff(), 0), max_connections=64
        )
        #: The connection every function call goes over (pipelined).
        self.calls = RedisPipe(options)
        self._loaded = False
        self._loading: asyncio.Lock | None = None
        self.closed = False
        #: ``local clock - server clock``, from the latest reply (to arm timers).
        self.offset = 0.0

    @property
    def endpoint(self) -> str:
        """Where the server is, for messages."""
        return f"{self.options.host}:{self.options.port}"

    async def load(self) -> None:
        """Load the library (once; again after the server lost it)."""
        if self._loading is None:
            self._loading = asyncio.Lock()
        async with self._loading:
            if self._loaded:
                return
            try:
                await self.client.function_load(LIBRARY)
            except rexc.NoPermissionError as error:
                raise PermissionDeniedError(
                    f"Redis refused to load tenure's functions ({error}): allow the user "
                    "+function|load and +fcall"
                ) from None
            except rexc.ResponseError as error:
                if "already exists" not in str(error):
                    raise UnavailableError(f"Redis refused tenure's functions: {error}") from None
            except _CONNECTION_ERRORS as error:
                raise UnavailableError(f"Redis at {self.endpoint} unreachable: {error}") from None
            self._loaded = True

    async def call(self, op: str, base: str, *args: str | bytes | int) -> FunctionReply:
        """Call function ``op`` on the node at key prefix ``base`` (once)."""
        if self.closed:
            raise UnavailableError("the client is closed")
        if not self._loaded:
            await self.load()
        sent = asyncio.get_running_loop().time()
        name = function_name(op)
        try:
            raw = await self.calls.exchange("FCALL", name, 1, base, *args)
        except rexc.NoPermissionError as error:
            raise PermissionDeniedError(f"Redis refused {op} to this user: {error}") from None
        except rexc.ResponseError as error:
            if "Function not found" in str(error):
                self._loaded = False  # the server lost its functions (a restart): load again
                await self.load()
                raw = await self._again(op, name, base, args)
            else:
                raise _error(error) from None
        except _CONNECTION_ERRORS as error:
            if self.closed:
                raise UnavailableError("the client is closed") from None
            raise UnavailableError(f"Redis at {self.endpoint} unreachable: {error}") from None
        except Exception:
            if self.closed:  # the pool was closed under the call (redis-py's own errors)
                raise UnavailableError("the client is closed") from None
            raise
        reply = FunctionReply(raw)
        self.offset = sent - reply.now  # the send time: never later than the server's
        return reply

    async def _again(
        self, op: str, name: str, base: str, args: tuple[str | bytes | int, ...]
    ) -> Any:
        """The call once more, after the library was loaded again."""
        try:
            return await self.calls.exchange("FCALL", name, 1, base, *args)
        except rexc.NoPermissionError as error:
            raise PermissionDeniedError(f"Redis refused {op} to this user: {error}") from None
        except rexc.ResponseError as error:
            raise _error(error) from None
        except _CONNECTION_ERRORS as error:
            raise UnavailableError(f"Redis at {self.endpoint} unreachable: {error}") from None

    def call_now(
        self, op: str, base: str, *args: str | bytes | int
    ) -> asyncio.Future[FunctionReply] | None:
        """Call function ``op`` now, in the caller's turn of the loop, so that it goes
        out before any later call: its reply's future (errors as :meth:`call` raises
        them), or None if it cannot be sent now (not connected, or the library not
        known to be loaded): then the caller uses :meth:`call`."""
        if self.closed or not self._loaded:
            return None
        loop = asyncio.get_running_loop()
        sent = loop.time()
        raw = self.calls.send_now("FCALL", function_name(op), 1, base, *args)
        if raw is None:
            return None
        reply: asyncio.Future[FunctionReply] = loop.create_future()
        raw.add_done_callback(partial(self._replied, op, sent, reply))
        return reply

    def _replied(
        self, op: str, sent: float, reply: asyncio.Future[FunctionReply], raw: asyncio.Future[Any]
    ) -> None:
        """The answer of :meth:`call_now`'s call, as :meth:`call` would give it."""
        if raw.cancelled():
            if not reply.done():
                reply.cancel()
            return
        error = raw.exception()
        if reply.done():
            return
        if error is None:
            answer = FunctionReply(raw.result())
            self.offset = sent - answer.now
            reply.set_result(answer)
        elif isinstance(error, rexc.ResponseError) and "Function not found" in str(error):
            self._loaded = False  # the next call() loads the library again
            reply.set_exception(UnavailableError(f"Redis lost tenure's functions: {error}"))
        else:
            reply.set_exception(self._mapped(op, error))

    def _mapped(self, op: str, error: BaseException) -> BaseException:
        """A redis-py error of a call as tenure's."""
        if isinstance(error, rexc.NoPermissionError):
            return PermissionDeniedError(f"Redis refused {op} to this user: {error}")
        if isinstance(error, rexc.ResponseError):
            return _error(error)
        if self.closed:
            return UnavailableError("the client is closed")
        if isinstance(error, _CONNECTION_ERRORS):
            return UnavailableError(f"Redis at {self.endpoint} unreachable: {error}")
        return error

    async def retrying(
        self, deadline: float | None, op: str, base: str, *args: str | bytes | int
    ) -> FunctionReply:
        """:meth:`call`, sent again while Redis cannot be reached, until ``deadline``
        (the loop's clock; None: one connect timeout from now)."""
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + self.options.connect_timeout
        pause = RETRY_MIN
        while True:
            try:
                return await self.call(op, base, *args)
            except UnavailableError:
                if self.closed or loop.time() + pause > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_MAX)

    def local_time(self, server_time: float) -> float:
        """``server_time`` on this loop's clock."""
        return server_time + self.offset

    async def close(self) -> None:
        """Close the pool."""
        self.closed = True
        await self.calls.close()
        await self.client.aclose()


def is_tenure_error(error: BaseException) -> bool:
    """Whether ``error`` is one of tenure's (not an I/O failure)."""
    return isinstance(error, TenureError) and not isinstance(error, UnavailableError)
