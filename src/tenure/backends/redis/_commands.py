"""The engine's commands as Redis function calls: the work of a Redis session's channel.

A session on Redis is a :class:`~tenure.backends._engine.CommandStore` whose channel
is its :class:`~tenure.backends.redis._store.RedisStore`: every command the store
sends becomes one call of a function in ``lua/`` (:func:`apply`), and the reply
is the engine's reply to it. What each call carries beyond the engine's command,
said once, here:

* **Turns.** An acquire (one name, or an all-or-none set of names) joins each
  semaphore's queue in this client's order (:meth:`RedisHome.joining`): the
  names' turns taken in name order (two of this client's requests for overlapping
  names then never wait for each other's turns).
* **Retries.** A call that must not be applied twice carries a request key, whose
  answer the functions keep for a while (a retry is answered as the first try
  was), or an id that makes a second try find the first one's work (an acquire's
  or a withdrawal's request id, a claim's id). A release keeps its key until it is
  answered (:class:`~tenure.backends.redis._release.KeyedReleases`).
* **Leases.** A grant with a lease TTL makes the session wait for the node's
  deadlines (``has_leases``: the inbox then ticks).
* **A forced delete** is told at once to this client's own sessions that waited for
  or held the semaphore (their pushes come later, and count once).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar, cast

from tenure._core import (
    Acquire,
    AcquireAll,
    AcquireAllResult,
    AcquireResult,
    AcquireStatus,
    AdoptHold,
    CancelAcquire,
    ClaimName,
    Command,
    CreateSemaphore,
    DeleteSemaphore,
    DescribeResult,
    DescribeSemaphore,
    DescribeSession,
    OfferHold,
    RateReservation,
    Release,
    Renew,
    ReserveUnits,
    SessionState,
    SwapSemaphoreData,
    UpdateSemaphore,
)
from tenure._core.claims import ClaimRecord, parse_claim
from tenure.backends._store import SessionLosses, SessionView
from tenure.backends.redis._codec import (
    decode_count,
    decode_description,
    decode_session_state,
    decode_ttl,
    encode_count,
    encode_timeout,
)
from tenure.backends.redis._release import KeyedReleases
from tenure.errors import LeaseLostError, NotFoundError

__all__ = ["CommandsHome", "apply"]

R = TypeVar("R")

#: What each status of the acquire functions means.
STATUS: Final = {b"G": AcquireStatus.GRANTED, b"B": AcquireStatus.BUSY, b"Q": AcquireStatus.QUEUED}


class OtherSession(SessionView, SessionLosses, Protocol):
    """Another session of this client, as a forced delete tells it: its waits failed
    (its ledger), its grants lost."""


class OtherStore(Protocol):
    """Another session's store of this client, as a forced delete tells it."""

    @property
    def session(self) -> OtherSession:
        """Its session."""


class ClientHome(Protocol):
    """What the commands ask of the client's sessions' shared part."""

    def request_key(self) -> str:
        """A request key unique across clients (the answers kept for retries)."""

    def joining(self, base: str, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Held while a request of this client joins ``name``'s queue."""

    @property
    def sessions(self) -> Mapping[tuple[str, int], OtherStore]:
        """The client's live sessions, by (node base, session id)."""


class CommandsHome(Protocol):
    """What the commands ask of their home, the session's store (a
    :class:`~tenure.backends.redis._store.RedisStore`)."""

    @property
    def backend(self) -> ClientHome:
        """The client's shared part."""

    @property
    def base(self) -> str:
        """The node's key prefix (``<prefix>{N}:``)."""

    @property
    def releases(self) -> KeyedReleases:
        """The session's releases, each with a request key kept until answered."""

    #: Whether the session holds a grant with a lease TTL, or an end (a max_hold).
    has_leases: bool

    def search_limit(self) -> int:
        """How far an acquire that must wait looks for a deadlock (0: not at all)."""

    async def invoke(self, op: str, key: str, *args: str | bytes | int) -> Any:
        """Call function ``op`` for the session (sent again until its deadline)."""


async def apply(home: CommandsHome, command: Command[R]) -> R:
    """The function call that does ``command`` (those a session sends), and its reply."""
    run = _CALLS.get(type(command))
    if run is None:
        raise TypeError(f"redis:// sends no {type(command).__name__}")
    return cast(R, await run(home, command))


async def _acquire(home: CommandsHome, command: Acquire) -> AcquireResult:
    async with home.backend.joining(home.base, command.name):
        result = await home.invoke(
            "acquire",
            "",  # the request id makes a retry safe (lua/50_semaphore_ops.lua, acquire)
            command.name,
            command.hold,
            command.request_id,
            encode_count(command.count),
            command.data,
            encode_timeout(command.timeout),
            "1" if command.ephemeral else "0",
            command.task,
            home.search_limit(),
            "" if command.max_hold is None else repr(command.max_hold),
        )
    status = STATUS[result[0]]
    if status is not AcquireStatus.GRANTED:
        return AcquireResult(status)
    ttl = decode_ttl(result[2])
    if ttl is not None or len(result) > 3:  # (a fourth item: the grant has an end)
        home.has_leases = True
    return AcquireResult(status, int(result[1]), command.count, ttl)


async def _acquire_all(home: CommandsHome, command: AcquireAll) -> AcquireAllResult:
    """One function for every name (lua/55_sets.lua), under every name's turn."""
    members = [
        part
        for member in zip(command.names, command.holds, command.request_ids, strict=True)
        for part in member
    ]
    async with contextlib.AsyncExitStack() as turns:
        for name in sorted(command.names):
            await turns.enter_async_context(home.backend.joining(home.base, name))
        result = await home.invoke(
            "acquire_all",
            home.backend.request_key(),  # (a retry is answered as the first try)
            encode_count(command.count),
            command.data,
            encode_timeout(command.timeout),
            "1" if command.ephemeral else "0",
            len(command.names),
            *members,
            command.task,
            home.search_limit(),
        )
    status = STATUS[result[0]]
    if status is not AcquireStatus.GRANTED:
        return AcquireAllResult(status)
    count = len(command.names)
    ttl = decode_ttl(result[1 + count])
    if ttl is not None or len(result) > 2 + count:  # ('1' after the TTL: an end)
        home.has_leases = True
    return AcquireAllResult(status, tuple(int(token) for token in result[1 : 1 + count]), ttl)


async def _withdraw(home: CommandsHome, command: CancelAcquire) -> bool:
    """Withdrawn if it was queued; a grant that raced it is left to the session (the
    function's ``kept`` flag set: it never releases here)."""
    args = (command.name, command.hold, command.request_id, "1")
    return bool(await home.invoke("withdraw", "", *args) == b"Q")


async def _release(home: CommandsHome, command: Release) -> bool:
    return await home.releases.send(command.name, command.hold)


async def _renew(home: CommandsHome, command: Renew) -> float:
    """The grant's lease restarted on Redis's clock."""
    return float(await home.invoke("renew", "", command.name, command.hold))


async def _create(home: CommandsHome, command: CreateSemaphore) -> None:
    key = home.backend.request_key()
    await home.invoke(
        "create_semaphore", key, command.name, encode_count(command.limit), command.data
    )


async def _update(home: CommandsHome, command: UpdateSemaphore) -> None:
    # A request key: a retry after a lost answer is answered as the first try was, not
    # applied again (after another client's update, a second copy would undo it).
    key = home.backend.request_key()
    await home.invoke("update_semaphore", key, command.name, command.data)


async def _swap(home: CommandsHome, command: SwapSemaphoreData) -> bool:
    key = home.backend.request_key()
    args = (command.name, command.expected, command.data)
    return bool(await home.invoke("swap_semaphore_data", key, *args))


async def _reserve(home: CommandsHome, command: ReserveUnits) -> RateReservation:
    """On Redis's clock."""
    key = home.backend.request_key()
    wait = "" if command.max_wait is None else repr(float(command.max_wait))
    count = repr(float(command.count))
    text = await home.invoke("reserve_units", key, command.name, count, wait)
    granted, waited, at = (text.decode() if isinstance(text, bytes) else str(text)).split()
    return RateReservation(granted == "1", float(waited), float(at))


async def _claim(home: CommandsHome, command: ClaimName) -> ClaimRecord:
    """On Redis's clock (lua/70_claims.lua); a retry carries the same claim id, and is
    answered with the claim the first try made."""
    times = (repr(float(command.at_least)), repr(float(command.at_most)))
    text = await home.invoke("claim", "", command.name, command.claim_id, *times, command.data)
    return parse_claim(command.name, bytes(text))


async def _offer(home: CommandsHome, command: OfferHold) -> AcquireResult:
    """The digest kept beside the hold (lua/75_handoffs.lua); sent again, the same offer."""
    tok, count, ttl = await home.invoke(
        "offer_hold", "", command.name, command.hold, command.digest.hex()
    )
    return AcquireResult(AcquireStatus.GRANTED, int(tok), decode_count(count), decode_ttl(ttl))


async def _adopt(home: CommandsHome, command: AdoptHold) -> AcquireResult:
    """The hold moved (lua/75_handoffs.lua), given the digest of the secret: Lua has no
    SHA-256, and the secret itself need not reach Redis. A retry (its request key) is
    answered as the first try was."""
    digest = hashlib.sha256(command.secret).hexdigest()
    result = await home.invoke(
        "adopt_hold",
        home.backend.request_key(),
        command.name,
        command.hold,
        command.holder,
        command.holder_hold,
        command.token,
        digest,
    )
    if len(result) == 1:  # (not offered so: the engine's words, as its LeaseLostError)
        raise LeaseLostError(
            f"the hold on {command.name!r} handed off with token {command.token} cannot be "
            "adopted: it ended, was adopted already or offered again, or this is not its "
            "hand-off"
        )
    tok, count, raw_ttl = result[:3]
    ttl = decode_ttl(raw_ttl)
    if ttl is not None or len(result) > 3:  # (a fourth item: the grant has an end)
        home.has_leases = True
    return AcquireResult(AcquireStatus.GRANTED, int(tok), decode_count(count), ttl)


async def _delete(home: CommandsHome, command: DeleteSemaphore) -> None:
    """This client's own sessions hear of it at once."""
    name, key = command.name, home.backend.request_key()
    message, failed, lost = await home.invoke(
        "delete_semaphore", key, name, "1" if command.force else "0"
    )
    text = message.decode()
    sessions = home.backend.sessions
    for sid, _hold, request_id in failed:
        waiting = sessions.get((home.base, int(sid)))
        if waiting is not None:
            waiting.session.ledger.failed(int(request_id), NotFoundError(text))
    for sid, hold, token in lost:
        holder = sessions.get((home.base, int(sid)))
        if holder is not None:
            holder.session.grant_lost(name, int(hold), int(token), LeaseLostError(text))


async def _describe(home: CommandsHome, command: DescribeSemaphore) -> DescribeResult:
    """NotFoundError for a missing semaphore (watches are the session's, :mod:`._watch`)."""
    name = command.name
    owners, waiters = "1" if command.owners else "0", "1" if command.waiters else "0"
    description = decode_description(
        name, await home.invoke("describe_semaphore", "", name, owners, waiters)
    )
    if not description.exists:
        raise NotFoundError(f"semaphore {name!r} does not exist")
    return DescribeResult(description)


async def _describe_session(home: CommandsHome, command: DescribeSession) -> SessionState:
    """What Redis keeps for the session, as the engine's one page of it."""
    holds_raw, waits_raw = await home.invoke("describe_session", "")
    return decode_session_state(command.session_id, holds_raw, waits_raw)


_CALLS: Final[Mapping[type[Command[Any]], Callable[[CommandsHome, Any], Awaitable[Any]]]] = {
    Acquire: _acquire,
    AcquireAll: _acquire_all,
    CancelAcquire: _withdraw,
    Release: _release,
    Renew: _renew,
    CreateSemaphore: _create,
    UpdateSemaphore: _update,
    SwapSemaphoreData: _swap,
    ReserveUnits: _reserve,
    ClaimName: _claim,
    OfferHold: _offer,
    AdoptHold: _adopt,
    DeleteSemaphore: _delete,
    DescribeSemaphore: _describe,
    DescribeSession: _describe_session,
}
