"""Guards that make a resource check fencing tokens: PostgreSQL, Redis, a file.

A fencing token protects only a resource that checks it: a holder paused past its
lease (GC, swap, a stopped VM) wakes up still believing it holds the lock, and
only the resource can tell that a newer holder has written since. Each guard keeps
the highest token its resource has accepted and refuses a lower one with
:class:`tenure.errors.FencedError`, atomically with the write it protects:

* :class:`PostgresFence`: an upsert in the write's own transaction (psycopg 3).
* :class:`RedisFence`: one Lua script that checks, raises the fence and writes
  (redis-py, ``redis.Redis`` or ``redis.asyncio.Redis``).
* :class:`FileFence`: a token file next to the data, both replaced atomically
  under an flock.

::

    async with session.mutex("invoices") as lock:
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            async with fence.atransaction(conn, "invoices", lock.token):
                await conn.execute("UPDATE invoices SET ...")

redis-py and psycopg are imported only inside the calls that use them: this package
imports without either, and a guard uses the client it is handed.
``docs/fencing.md`` says what each guarantees, and what not.

Layer (CONTRIBUTING.md): its modules may import each other and tenure.errors.
"""

from __future__ import annotations

from tenure.fencing._file import LOCK_TIMEOUT, FileFence
from tenure.fencing._postgres import PostgresFence
from tenure.fencing._redis import AsyncRedisClient, FencedScript, RedisClient, RedisFence
from tenure.fencing._token import MAX_RESOURCE_BYTES, MAX_TOKEN, check_token

__all__ = [
    "AsyncRedisClient",
    "FencedScript",
    "FileFence",
    "LOCK_TIMEOUT",
    "MAX_RESOURCE_BYTES",
    "MAX_TOKEN",
    "PostgresFence",
    "RedisClient",
    "RedisFence",
    "check_token",
]
