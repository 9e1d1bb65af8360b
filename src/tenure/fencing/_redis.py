"""The Redis guard: one Lua script checks the token, raises the fence, and writes.

The resource's highest accepted token is a string key (``tenure:fence:<resource>``
by default). The script compares the writer's token with it, refuses a lower one,
stores the writer's token, then runs the write: a set of keys (:meth:`RedisFence.write`)
or a Lua body of the caller's (:meth:`RedisFence.script`). Redis runs a script
alone, so no other client's command comes between the check and the write.

Tokens go in and out as decimal strings and are compared as such (by length, then
digit by digit): Lua numbers are doubles, exact only up to 2**53, and tokens reach
2**64-1.

A guard only calls its client's ``evalsha``/``script_load``/``get``, so any
redis-py client serves; redis-py itself is imported only to recognise its
NoScriptError, when a call fails.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from typing import Any, Final, Protocol

from tenure.errors import FencedError, InvalidArgumentError, PreconditionFailedError
from tenure.fencing._token import (
    MAX_RESOURCE_BYTES,
    MAX_TOKEN,
    check_limit,
    check_resource,
    check_token,
)

__all__ = ["AsyncRedisClient", "FencedScript", "RedisClient", "RedisFence"]

#: Keys and arguments a script accepts: what redis-py encodes.
Encodable = str | bytes | int | float

#: The check, then the caller's body as a function of its own KEYS and ARGV (the
#: fence's key and the token are taken off the front). Replies: {1, body's result}
#: written; {0, highest} refused; {-1, value} the fence key holds no token.
_PROLOGUE: Final = """
local function fence_less(a, b)
  if #a ~= #b then
    return #a < #b
  end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return false
end
local fence_token = ARGV[1]
local fence_highest = redis.call('GET', KEYS[1])
if fence_highest then
  if not string.match(fence_highest, '^[1-9][0-9]*$')
      or fence_less('@MAX_TOKEN@', fence_highest) then
    return {-1, fence_highest}
  end
  if fence_less(fence_token, fence_highest) then
    return {0, fence_highest}
  end
end
redis.call('SET', KEYS[1], fence_token)
local fence_keys, fence_args = {}, {}
for i = 2, #KEYS do fence_keys[i - 1] = KEYS[i] end
for i = 2, #ARGV do fence_args[i - 1] = ARGV[i] end
local function fence_body(KEYS, ARGV)
""".replace("@MAX_TOKEN@", str(MAX_TOKEN))
_EPILOGUE: Final = """
end
return {1, fence_body(fence_keys, fence_args)}
"""
#: The body of :meth:`RedisFence.write`: ARGV[1] = how many keys to SET (with
#: ARGV[2..] as their values), the keys after those are deleted.
_WRITE_BODY: Final = """
local sets = tonumber(ARGV[1])
for i = 1, sets do redis.call('SET', KEYS[i], ARGV[i + 1]) end
for i = sets + 1, #KEYS do redis.call('DEL', KEYS[i]) end
return #KEYS
"""


class RedisClient(Protocol):
    """What the guard needs of a synchronous client (``redis.Redis``)."""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Encodable) -> Any:
        """EVALSHA."""

    def script_load(self, script: str) -> Any:
        """SCRIPT LOAD."""

    def get(self, name: str) -> Any:
        """GET."""


class AsyncRedisClient(Protocol):
    """What the guard needs of an asynchronous client (``redis.asyncio.Redis``)."""

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Encodable) -> Awaitable[Any]:
        """EVALSHA."""

    def script_load(self, script: str) -> Awaitable[Any]:
        """SCRIPT LOAD."""

    def get(self, name: str) -> Awaitable[Any]:
        """GET."""


def _no_script(error: Exception) -> bool:
    """Whether ``error`` is redis-py's NoScriptError (the server lost its script cache)."""
    from redis.exceptions import NoScriptError

    return isinstance(error, NoScriptError)


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _not_a_token(key: str, value: object) -> PreconditionFailedError:
    return PreconditionFailedError(
        f"fence key {key!r} holds {_text(value)[:40]!r}, not a fencing token: refusing to"
        " trust it (something other than a fence wrote it)"
    )


def _stored_token(key: str, value: object) -> int | None:
    """The token a fence key holds (None: no key); PreconditionFailedError if not one."""
    if value is None:
        return None
    text = _text(value)
    if not (text.isascii() and text.isdigit() and text[0] != "0" and len(text) <= 20):
        raise _not_a_token(key, value)
    try:
        return check_token(int(text))
    except InvalidArgumentError:  # 20 digits, beyond 2**64-1
        raise _not_a_token(key, value) from None


class FencedScript:
    """A Lua body that runs only when the token passes the fence; from :meth:`RedisFence.script`.

    The body sees ``KEYS`` and ``ARGV`` as given to :meth:`run` (the fence's own key
    and the token are not among them) and its ``return`` value is what
    :meth:`run` returns.
    """

    def __init__(self, fence: RedisFence, body: str) -> None:
        """The script of ``body`` behind ``fence`` (see :meth:`RedisFence.script`)."""
        if not isinstance(body, str) or not body.strip():
            raise InvalidArgumentError(f"body must be a non-empty str of Lua, got {body!r}")
        self.fence = fence
        self.body = body
        self.source = _PROLOGUE + body + _EPILOGUE
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()

    def _argv(
        self, resource: str, token: int, keys: Sequence[Encodable], args: Sequence[Encodable]
    ) -> tuple[str, int, list[Encodable]]:
        resource = check_resource(resource, self.fence.max_resource_bytes)
        token = check_token(token)
        keys, args = list(keys), list(args)
        return resource, token, [self.fence.key(resource), *keys, str(token), *args]

    def _result(self, resource: str, token: int, reply: Sequence[Any]) -> Any:
        status = int(reply[0])
        if status == 1:
            return reply[1] if len(reply) > 1 else None
        if status == 0:
            raise FencedError(resource, token, int(_text(reply[1])))
        raise _not_a_token(self.fence.key(resource), reply[1])

    def run(
        self,
        client: RedisClient,
        resource: str,
        token: int,
        keys: Sequence[Encodable] = (),
        args: Sequence[Encodable] = (),
    ) -> Any:
        """Check ``token`` against ``resource``'s fence and, if it passes, run the body.

        Raises :class:`~tenure.errors.FencedError` (nothing ran) when the token is
        lower than the highest the resource accepted. A Lua error in the body is
        redis-py's ``ResponseError``; Redis keeps what the body wrote before it
        (scripts are not rolled back), and the fence keeps the new token.
        """
        resource, token, argv = self._argv(resource, token, keys, args)
        numkeys = 1 + len(keys)
        try:
            reply = client.evalsha(self.sha, numkeys, *argv)
        except Exception as error:
            if not _no_script(error):
                raise
            client.script_load(self.source)
            reply = client.evalsha(self.sha, numkeys, *argv)
        return self._result(resource, token, reply)

    async def arun(
        self,
        client: AsyncRedisClient,
        resource: str,
        token: int,
        keys: Sequence[Encodable] = (),
        args: Sequence[Encodable] = (),
    ) -> Any:
        """:meth:`run` on an asynchronous client."""
        resource, token, argv = self._argv(resource, token, keys, args)
        numkeys = 1 + len(keys)
        try:
            reply = await client.evalsha(self.sha, numkeys, *argv)
        except Exception as error:
            if not _no_script(error):
                raise
            await client.script_load(self.source)
            reply = await client.evalsha(self.sha, numkeys, *argv)
        return self._result(resource, token, reply)


class RedisFence:
    """Checks fencing tokens in Redis, atomically with the protected write.

    ::

        fence = RedisFence()
        fence.write(r, "orders", lock.token, {"orders:42": b"paid"})   # FencedError if stale
        await fence.awrite(ar, "orders", lock.token, {"orders:42": b"paid"})

        bump = fence.script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        bump.run(r, "orders", lock.token, keys=["orders:count"], args=[1])

    A token equal to the highest seen passes (the holder writes again); a lower one
    raises :class:`~tenure.errors.FencedError` and nothing is written. The fence of
    ``resource`` is the key ``prefix + resource``. With Redis Cluster every key of
    one write must be in one slot: put a hash tag in the prefix and the keys
    (``prefix="{orders}:fence:"``, ``"{orders}:42"``).
    """

    def __init__(
        self, *, prefix: str = "tenure:fence:", max_resource_bytes: int = MAX_RESOURCE_BYTES
    ) -> None:
        """See the class; ``max_resource_bytes`` bounds a resource's name (UTF-8)."""
        if not isinstance(prefix, str):
            raise InvalidArgumentError(f"prefix must be a str, got {prefix!r}")
        self.prefix = prefix
        self.max_resource_bytes = check_limit(
            max_resource_bytes, "max_resource_bytes", 1, 512 * 1024 * 1024
        )
        self._write = FencedScript(self, _WRITE_BODY)

    def __repr__(self) -> str:
        return f"RedisFence(prefix={self.prefix!r})"

    def key(self, resource: str) -> str:
        """The key that holds ``resource``'s highest accepted token."""
        return self.prefix + check_resource(resource, self.max_resource_bytes)

    def script(self, body: str) -> FencedScript:
        """A script running the Lua ``body`` behind this fence (see :class:`FencedScript`)."""
        return FencedScript(self, body)

    @staticmethod
    def _write_args(
        values: Mapping[str, Encodable], delete: Iterable[str]
    ) -> tuple[list[Encodable], list[Encodable]]:
        if not isinstance(values, Mapping):
            raise InvalidArgumentError(f"values must be a mapping of key to value, got {values!r}")
        deleted = [delete] if isinstance(delete, str | bytes) else list(delete)
        keys: list[Encodable] = [*values.keys(), *deleted]
        return keys, [len(values), *values.values()]

    def write(
        self,
        client: RedisClient,
        resource: str,
        token: int,
        values: Mapping[str, Encodable],
        *,
        delete: Iterable[str] = (),
    ) -> None:
        """SET every key of ``values`` (and DEL every key of ``delete``) if ``token`` passes."""
        keys, args = self._write_args(values, delete)
        self._write.run(client, resource, token, keys, args)

    async def awrite(
        self,
        client: AsyncRedisClient,
        resource: str,
        token: int,
        values: Mapping[str, Encodable],
        *,
        delete: Iterable[str] = (),
    ) -> None:
        """:meth:`write` on an asynchronous client."""
        keys, args = self._write_args(values, delete)
        await self._write.arun(client, resource, token, keys, args)

    def highest(self, client: RedisClient, resource: str) -> int | None:
        """The highest token ``resource`` has accepted, None if none yet."""
        key = self.key(resource)
        return _stored_token(key, client.get(key))

    async def ahighest(self, client: AsyncRedisClient, resource: str) -> int | None:
        """:meth:`highest` on an asynchronous client."""
        key = self.key(resource)
        return _stored_token(key, await client.get(key))
