"""Semaphore administration on Redis: one function call each, for one session.

Create, update, compare-and-set, reserve rate-limiter units, claim, delete,
describe and watch a semaphore (``lua/50_semaphore_ops.lua``, ``70_claims.lua``,
``57_prefix_watches.lua``). A call that changes something carries a fresh request
key, so a retry after a lost answer is answered as the first try was (its
functions keep the answers a while); reads and watches need none. A forced delete
is told at once to this client's own sessions that waited for or held the
semaphore (their pushes come later, and count once).

:class:`RedisAdmin` works for one :class:`~tenure.backends.redis._store.RedisStore`
through :class:`AdminHost`, the part of the store it needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from tenure._core.claims import ClaimRecord, parse_claim
from tenure._core.commands import RateReservation
from tenure._core.values import SemaphoreDescription
from tenure.backends._base import PrefixWatchStream
from tenure.backends._store import Owner
from tenure.backends.redis._codec import decode_description, encode_count
from tenure.backends.redis._watch import RedisWatch, WatchHost, watch_prefix
from tenure.errors import LeaseLostError, NotFoundError

__all__ = ["AdminHome", "AdminHost", "RedisAdmin"]


class OwnedStore(Protocol):
    """Another session's store of this client, as a forced delete tells it."""

    @property
    def owner(self) -> Owner:
        """Its session."""


class AdminHome(Protocol):
    """What the administration needs of the client's sessions' shared part."""

    def request_key(self) -> str:
        """A request key unique across clients (the answers kept for retries)."""

    @property
    def sessions(self) -> Mapping[tuple[str, int], OwnedStore]:
        """The client's live sessions, by (node base, session id)."""


class AdminHost(WatchHost, Protocol):
    """What the administration needs of its session's store: what a watch needs, the
    node's key prefix, and the client's shared part."""

    @property
    def base(self) -> str:
        """The node's key prefix (``<prefix>{N}:``)."""

    @property
    def backend(self) -> AdminHome:
        """The client's shared part (its :class:`~tenure.backends.redis._store.RedisHome`)."""


class RedisAdmin:
    """The semaphore calls of one session (module docstring)."""

    __slots__ = ("_store",)

    def __init__(self, store: AdminHost) -> None:
        self._store = store

    async def create_semaphore(self, name: str, limit: int, data: bytes) -> None:
        """One function (its request key makes a retry safe)."""
        key = self._store.backend.request_key()
        await self._store.invoke("create_semaphore", key, name, encode_count(limit), data)

    async def update_semaphore(self, name: str, data: bytes) -> None:
        """One function."""
        await self._store.invoke("update_semaphore", "", name, data)

    async def swap_semaphore_data(self, name: str, expected: bytes, data: bytes) -> bool:
        """One function (its request key makes a retry safe)."""
        key = self._store.backend.request_key()
        return bool(await self._store.invoke("swap_semaphore_data", key, name, expected, data))

    async def reserve_units(
        self, name: str, count: float, max_wait: float | None
    ) -> RateReservation:
        """One function, on Redis's clock (its request key makes a retry safe)."""
        key = self._store.backend.request_key()
        wait = "" if max_wait is None else repr(float(max_wait))
        text = await self._store.invoke("reserve_units", key, name, repr(float(count)), wait)
        granted, waited, at = (text.decode() if isinstance(text, bytes) else str(text)).split()
        return RateReservation(granted == "1", float(waited), float(at))

    async def claim(
        self, name: str, claim_id: str, at_least: float, at_most: float, data: bytes
    ) -> ClaimRecord:
        """One function, on Redis's clock (lua/70_claims.lua); a retry carries the same
        claim id, and is answered with the claim the first try made."""
        text = await self._store.invoke(
            "claim", "", name, claim_id, repr(float(at_least)), repr(float(at_most)), data
        )
        return parse_claim(name, bytes(text))

    async def delete_semaphore(self, name: str, force: bool) -> None:
        """One function; this client's own sessions hear of it at once (their pushes come
        later, and count once)."""
        key = self._store.backend.request_key()
        message, failed, lost = await self._store.invoke(
            "delete_semaphore", key, name, "1" if force else "0"
        )
        text = message.decode()
        for sid, _hold, request_id in failed:
            waiting = self._store.backend.sessions.get((self._store.base, int(sid)))
            if waiting is not None:
                waiting.owner.ledger.failed(int(request_id), NotFoundError(text))
        for sid, hold, token in lost:
            holder = self._store.backend.sessions.get((self._store.base, int(sid)))
            if holder is not None:
                holder.owner.grant_lost(name, int(hold), int(token), LeaseLostError(text))

    async def describe_semaphore(
        self, name: str, *, owners: bool, waiters: bool
    ) -> SemaphoreDescription:
        """One function; NotFoundError for a missing semaphore."""
        raw = await self._store.invoke(
            "describe_semaphore", "", name, "1" if owners else "0", "1" if waiters else "0"
        )
        description = decode_description(name, raw)
        if not description.exists:
            raise NotFoundError(f"semaphore {name!r} does not exist")
        return description

    async def watch_semaphore(
        self, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> RedisWatch:
        """A watch read back after each push (:mod:`._watch`)."""
        watch = RedisWatch(self._store, name, data=data, owners=owners, waiters=waiters)
        await watch.start()
        return watch

    async def watch_prefix(
        self, prefix: str, *, data: bool, owners: bool, waiters: bool
    ) -> PrefixWatchStream:
        """A prefix watch registered in the node, read back after each push (:mod:`._watch`)."""
        return await watch_prefix(self._store, prefix)
