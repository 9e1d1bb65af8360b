"""Listings and kill_session on Redis.

**Nodes** have no index of their own (each node's keys share its hash tag, and an
index key would be a key outside every node): a page of nodes walks the database
with ``SCAN MATCH <prefix>{*}:cfg`` in batches of :data:`SCAN_BATCH` and keeps the
``limit`` smallest names after ``after``. That costs one pass over the database's
keys per page, which is what an operator's listing can afford, and needs nothing
kept in step when nodes come and go.

**Semaphores and sessions** are listed by functions (``lua/60_listing.lua``) from
two sorted indexes of the node, so a page costs O(log n + page).
"""

from __future__ import annotations

import heapq
import re
from typing import Final, Protocol

from redis import exceptions as rexc

from tenure._core.values import SemaphoreSummary, SessionSummary, check_name, check_page_limit
from tenure.backends._store_listing import (
    check_bound,
    check_session_after,
    check_session_id,
    page_args,
)
from tenure.backends.redis._codec import decode_semaphore_page, decode_session_page
from tenure.backends.redis._conn import RedisFunctions
from tenure.errors import NotFoundError, PermissionDeniedError, UnavailableError

__all__ = [
    "SCAN_BATCH",
    "SCAN_CALLS_MAX",
    "kill_session",
    "list_nodes",
    "list_semaphores",
    "list_sessions",
]

#: Keys one SCAN call looks at (its COUNT).
SCAN_BATCH: Final = 1000
#: Most SCAN calls one page of nodes makes (a database of up to a billion keys).
SCAN_CALLS_MAX: Final = 1_000_000

_GLOB_SPECIAL: Final = re.compile(r"([*?\[\]\\])")
_UNESCAPE: Final = re.compile(r"%(25|7B|7D)")
_ESCAPED: Final = {"25": "%", "7B": "{", "7D": "}"}


def _node_of(key: bytes, head: bytes) -> str | None:
    """The node whose settings' key ``key`` is (None: another key the pattern matched)."""
    escaped = key[len(head) : -len(b"}:cfg")]
    if b"}" in escaped:  # a key inside some node (a semaphore named "...}:cfg")
        return None
    try:
        text = escaped.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _UNESCAPE.sub(lambda match: _ESCAPED[match[1]], text)


class RedisListingHome(Protocol):
    """What the listings ask of their home, the backend they list for."""

    @property
    def conn(self) -> RedisFunctions:
        """The connection to Redis."""

    def base(self, node: str) -> str:
        """The key prefix of ``node`` (its name checked)."""

    def request_key(self) -> str:
        """A request key unique across clients."""


async def list_nodes(backend: RedisListingHome, after: str, limit: int) -> list[str]:
    """See :meth:`tenure.backends._base.Backend.list_nodes` (one SCAN pass per page)."""
    after = check_bound(after)
    limit = check_page_limit(limit)
    prefix = backend.conn.options.prefix
    head = f"{prefix}{{".encode()
    pattern = _GLOB_SPECIAL.sub(r"\\\1", prefix) + "{*}:cfg"
    found: set[str] = set()
    cursor = 0
    try:
        for _ in range(SCAN_CALLS_MAX):
            cursor, keys = await backend.conn.client.scan(cursor, match=pattern, count=SCAN_BATCH)
            for key in keys:
                name = _node_of(key if isinstance(key, bytes) else key.encode(), head)
                if name is not None and name > after:
                    found.add(name)
            if len(found) > 4 * limit:  # keep the memory bounded by the page
                found = set(heapq.nsmallest(limit, found))
            if cursor == 0:
                return heapq.nsmallest(limit, found)
    except rexc.NoPermissionError as error:
        raise PermissionDeniedError(f"Redis refused SCAN: {error}") from None
    except (rexc.RedisError, OSError) as error:
        raise UnavailableError(f"Redis at {backend.conn.endpoint}: {error}") from None
    raise UnavailableError(f"listing nodes took more than {SCAN_CALLS_MAX} SCAN calls")


async def list_semaphores(
    backend: RedisListingHome, node: str, prefix: str, after: str, limit: int
) -> list[SemaphoreSummary]:
    """See :meth:`tenure.backends._base.Backend.list_semaphores`."""
    prefix, after, limit = page_args(prefix, after, limit)
    # The range of names after ``after`` that start with ``prefix``, as ZRANGEBYLEX
    # takes it. No UTF-8 text has the byte 0xff: every name with the prefix sorts
    # before the prefix followed by it.
    low = f"({after}" if after >= prefix else f"[{prefix}"
    high: str | bytes = f"[{prefix}".encode() + b"\xff" if prefix else "+"
    try:
        reply = await backend.conn.retrying(
            None, "list_semaphores", backend.base(node), prefix, low, high, str(limit)
        )
    except NotFoundError:
        raise NotFoundError(f"node {node!r} does not exist") from None
    return decode_semaphore_page(reply.result)


async def list_sessions(
    backend: RedisListingHome, node: str, after: int, limit: int
) -> list[SessionSummary]:
    """See :meth:`tenure.backends._base.Backend.list_sessions`."""
    after = check_session_after(after)
    limit = check_page_limit(limit)
    try:
        reply = await backend.conn.retrying(
            None, "list_sessions", backend.base(node), str(after), str(limit)
        )
    except NotFoundError:
        raise NotFoundError(f"node {node!r} does not exist") from None
    return decode_session_page(reply.result)


async def kill_session(backend: RedisListingHome, node: str, session_id: int) -> None:
    """See :meth:`tenure.backends._base.Backend.kill_session`: the function ends it
    as its expiry does, and pushes the news to its client."""
    node, session_id = check_session_id(node, session_id)
    base = backend.base(check_name("node", node))
    try:
        await backend.conn.retrying(
            None, "kill_session", base, str(session_id), backend.request_key()
        )
    except NotFoundError as error:
        if "session" in str(error):
            raise
        raise NotFoundError(f"node {node!r} does not exist") from None
