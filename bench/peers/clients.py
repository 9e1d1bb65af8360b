"""One lock-client interface over every system compared, as its users would write it.

A :class:`LockClient` is what a process opens once (a tenure client, a Redis
connection pool, a gRPC channel to etcd); a :class:`LockSession` is one client of
the lock service (a tenure session, a Redis lock user, an etcd lease, a PostgreSQL
connection, a dflockd connection). Every wait is bounded by ``timeout`` seconds.
etcd's client is :mod:`bench.peers.etcd_lock`.

A session's :meth:`LockSession.awaited` is the same session in the form whose
release waits for the service's answer. tenure's block form (``async with
session.mutex(key):``) does not wait where the release is sent ahead of the next
request; ``lock = await session.mutex(key).lock()`` ... ``await lock.release()``
does, as every peer's release here does (redis-py's ``lock.release()``, etcd's
Unlock, ``pg_advisory_unlock``, dflockd's release).
"""

from __future__ import annotations

from typing import Any

import tenure

#: The tenure node every lock of the benchmarks lives in.
NODE = "bench"


class LockSession:
    """One client of a lock service: acquire and release mutexes by key."""

    async def acquire(self, key: str) -> Any:
        """Wait until the mutex ``key`` is held; return what release needs."""
        raise NotImplementedError

    async def release(self, handle: Any) -> None:
        """Release what ``acquire`` returned."""
        raise NotImplementedError

    async def close(self) -> None:
        """End the session (what it holds is released)."""

    def awaited(self) -> LockSession:
        """This session in the form whose release waits for the service's answer.

        Itself by default: every peer's release waits for its answer already.
        """
        return self


class LockClient:
    """What one process opens once to reach a lock service."""

    def __init__(self, url: str, timeout: float) -> None:
        self.url = url
        self.timeout = timeout

    async def open(self) -> None:
        """Connect (lazily connecting clients do nothing here)."""

    async def session(self) -> LockSession:
        """A new session (one client of the lock service)."""
        raise NotImplementedError

    async def close(self) -> None:
        """Close the client and everything it opened."""


# -- tenure ---------------------------------------------------------------------------


class _TenureSession(LockSession):
    def __init__(self, session: tenure.Session, own: tenure.Client | None) -> None:
        self._session = session
        self._own = own  # the client this session alone uses, if any

    async def acquire(self, key: str) -> Any:
        # ``async with session.mutex(key):`` entered and left by hand, to time each
        # half: what users write. Leaving it does not wait for the release's answer
        # where the backend sends it ahead of the next request (tenure://, memory://, redis://),
        # and waits for it elsewhere (docs/concepts.md, "Releasing").
        mutex = self._session.mutex(key)
        await mutex.__aenter__()
        return mutex

    async def release(self, handle: Any) -> None:
        await handle.__aexit__(None, None, None)

    async def close(self) -> None:
        await self._session.close()
        if self._own is not None:
            await self._own.aclose()

    def awaited(self) -> LockSession:
        return _TenureAwaitedSession(self._session, self)


class _TenureAwaitedSession(LockSession):
    """``lock = await session.mutex(key).lock()``, then ``await lock.release()``: the
    release returns once the backend has applied it (docs/concepts.md, "Releasing"),
    as redis-py's ``lock.release()`` returns with Redis's answer."""

    def __init__(self, session: tenure.Session, block: _TenureSession) -> None:
        self._session = session
        self._block = block  # the same session in the block form: closing it closes all

    async def acquire(self, key: str) -> Any:
        return await self._session.mutex(key).lock()

    async def release(self, handle: Any) -> None:
        await handle.release()

    async def close(self) -> None:
        await self._block.close()


class TenureClient(LockClient):
    """``tenure.connect(url)``: one client (one connection) and a session per user.

    With ``shared=False`` every session opens a client (a connection) of its own.
    """

    def __init__(self, url: str, timeout: float, *, shared: bool = True) -> None:
        # A private memory:// would give every client its own state: share it by name.
        super().__init__("memory://bench" if url == "memory://" else url, timeout)
        self.shared = shared
        self._client: tenure.Client | None = None

    async def open(self) -> None:
        self._client = await tenure.connect(self.url)
        await self._client.create_node(NODE, exist_ok=True)

    async def session(self) -> LockSession:
        assert self._client is not None, "open() first"
        if self.shared:
            return _TenureSession(await self._client.session(NODE), None)
        own = await tenure.connect(self.url)
        return _TenureSession(await own.session(NODE), own)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()


# -- redis ----------------------------------------------------------------------------


class _RedisSession(LockSession):
    def __init__(self, redis: Any, timeout: float) -> None:
        self._redis = redis
        self._timeout = timeout

    async def acquire(self, key: str) -> Any:
        # The stock Lock with its defaults (it polls every 0.1 s while the key is
        # taken): what a redis-py user gets. timeout= is the lease, a lock's TTL.
        lock = self._redis.lock(key, timeout=30, blocking_timeout=self._timeout)
        if not await lock.acquire():
            raise TimeoutError(f"redis lock {key!r} not acquired in {self._timeout}s")
        return lock

    async def release(self, handle: Any) -> None:
        await handle.release()


class RedisClient(LockClient):
    """``redis.asyncio.Redis``: one connection pool; each user takes ``Lock`` objects.

    With ``shared=False`` every session opens a ``redis.asyncio.Redis`` (so a pool,
    and a connection) of its own.
    """

    _redis: Any = None

    def __init__(self, url: str, timeout: float, *, shared: bool = True) -> None:
        super().__init__(url, timeout)
        self.shared = shared
        self._own: list[Any] = []  # the clients of the sessions, closed with this one

    async def open(self) -> None:
        import redis.asyncio

        self._redis = redis.asyncio.Redis.from_url(self.url)
        await self._redis.ping()

    async def session(self) -> LockSession:
        if self.shared:
            return _RedisSession(self._redis, self.timeout)
        import redis.asyncio

        own = redis.asyncio.Redis.from_url(self.url)
        self._own.append(own)
        await own.ping()  # connect now, before the clock starts, as the shared pool did
        return _RedisSession(own, self.timeout)

    async def close(self) -> None:
        for own in self._own:
            await own.aclose()
        if self._redis is not None:
            await self._redis.aclose()


# -- PostgreSQL advisory locks ---------------------------------------------------------


class _AdvisorySession(LockSession):
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def acquire(self, key: str) -> Any:
        # The server queues the waiter; lock_timeout (set at connect) bounds the wait.
        await self._conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
        return key

    async def release(self, handle: Any) -> None:
        await self._conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (handle,))

    async def close(self) -> None:
        await self._conn.close()  # a session's advisory locks die with its connection


class PostgresAdvisoryClient(LockClient):
    """``pg_advisory_lock`` through psycopg 3, one connection per session.

    What tooz's PostgreSQL driver does: a session-level advisory lock on a hash of
    the key, held by the connection (so a session is a connection, not shareable).
    """

    async def session(self) -> LockSession:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        await conn.execute(f"SET lock_timeout = {int(self.timeout * 1000)}")
        return _AdvisorySession(conn)


# -- dflockd --------------------------------------------------------------------------


class _DflockdSession(LockSession):
    def __init__(self, conn: Any, timeout: float) -> None:
        self._conn = conn
        self._timeout = max(1, int(timeout))  # the protocol counts whole seconds

    async def acquire(self, key: str) -> Any:
        from dflockd_client import _async

        token, _lease = await _async.acquire(self._conn, key, self._timeout)
        return key, token

    async def release(self, handle: Any) -> None:
        from dflockd_client import _async

        await _async.release(self._conn, *handle)

    async def close(self) -> None:
        await self._conn.close()


class DflockdClient(LockClient):
    """dflockd-client's async protocol functions: one connection per session.

    (Its ``DistributedLock`` opens a connection per lock; a connection per client
    that acquires and releases many keys is the cheaper, fairer use.) The
    protocol answers one request at a time per connection, so sessions cannot share.
    """

    async def session(self) -> LockSession:
        from dflockd_client import _async

        host, port = self.url.rsplit(":", 1)
        conn = await _async.open_conn(
            host, int(port), ssl_context=None, connect_timeout_s=self.timeout
        )
        return _DflockdSession(conn, self.timeout)


def lock_client(system: str, url: str, timeout: float, *, shared: bool = True) -> LockClient:
    """The client of ``system`` (a SYSTEMS name) at ``url``.

    ``shared=False``: every session opens a client (a connection) of its own.
    PostgreSQL advisory locks and dflockd's protocol take a connection per session
    either way (a session cannot share one): ``shared`` changes nothing there.
    """
    if system.startswith("tenure-"):
        return TenureClient(url, timeout, shared=shared)
    if system == "redis":
        return RedisClient(url, timeout, shared=shared)
    if system == "etcd":
        from bench.peers.etcd_lock import EtcdClient  # (it imports this module)

        return EtcdClient(url, timeout, shared=shared)
    classes: dict[str, type[LockClient]] = {
        "postgres": PostgresAdvisoryClient,
        "dflockd": DflockdClient,
    }
    if system not in classes:
        raise ValueError(f"unknown system {system!r}")
    return classes[system](url, timeout)
