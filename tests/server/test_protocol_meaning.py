"""docs/protocol.md section 6.1, statement by statement, on the wire of a real ``tenure serve``.

What a client written from the doc alone had to guess: that a mutex is every token
of an ephemeral semaphore, how long an ephemeral semaphore lives, NodeConfig's
defaults and ranges, what lock-delay holds back, what a restate does to counts and
tokens, and which code Acquire and Renew fail with. The end of a lock-delay, which
takes time to pass, is checked on the engine with explicit times instead.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AcquireResult,
    AcquireStatus,
    AlterNode,
    CancelAcquire,
    CloseSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeSemaphore,
    DetachSession,
    Engine,
    Granted,
    NodeConfig,
    Release,
    Renew,
    UpdateSemaphore,
)
from tenure.errors import ErrorCode

from .wire import Clients, ServerProcess, WireClient

DOC = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("### 6.1 What the commands mean") : DOC.index("## 7. Reply values")]

_names = itertools.count(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for this module; each test works in a node of its own."""
    with ServerProcess(tmp_path_factory.mktemp("meaning"), "--fsync", "off") as process:
        yield process


class Node:
    """A fresh node on the shared server, and sessions in it on one connection."""

    def __init__(self, client: WireClient, name: str) -> None:
        self.client = client
        self.name = name
        self._requests = itertools.count(1)

    async def session(self, timeout: float | None = 60.0) -> int:
        info = await self.client.call(CreateSession(self.name, b"key", timeout))
        return int(info.session_id)

    async def acquire(self, session: int, name: str, count: int, **fields: Any) -> AcquireResult:
        command = Acquire(session, name, count, next(self._requests), **fields)
        result: AcquireResult = await self.client.call(command)
        return result

    async def acquire_fails(self, session: int, name: str, count: int, **fields: Any) -> int:
        command = Acquire(session, name, count, next(self._requests), **fields)
        return int((await self.client.fail(command)).code)


def last_push(client: WireClient) -> object:
    """The latest push: a command's pushes to this connection come before its reply."""
    assert client.pushes, "no push came"
    return client.pushes[-1]


async def new_node(server: ServerProcess, wire: Clients, **config: object) -> Node:
    client = await wire.connect(server.port)
    name = f"n{next(_names)}"
    await client.call(CreateNode(name, NodeConfig(**config)))  # type: ignore[arg-type]
    return Node(client, name)


# -- a mutex is every token --------------------------------------------------------


async def test_one_token_of_an_ephemeral_semaphore_is_not_exclusive(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire)
    first, second = await node.session(), await node.session()
    for session in (first, second):
        got = await node.acquire(session, "db", 1, ephemeral=True, timeout=0)
        assert got.status is AcquireStatus.GRANTED
    result = await node.client.call(DescribeSemaphore(first, "db"))
    assert (result.description.limit, result.description.count) == (MAX_COUNT, 2)


async def test_every_token_is_a_mutex(server: ServerProcess, wire: Clients) -> None:
    node = await new_node(server, wire)
    holder, other = await node.session(), await node.session()
    got = await node.acquire(holder, "db", MAX_COUNT, ephemeral=True)
    assert got.status is AcquireStatus.GRANTED
    for count in (MAX_COUNT, 1):  # any count of anyone else waits
        busy = await node.acquire(other, "db", count, ephemeral=True, timeout=0)
        assert busy.status is AcquireStatus.BUSY
    queued = await node.acquire(other, "db", MAX_COUNT, ephemeral=True)
    assert queued.status is AcquireStatus.QUEUED
    assert await node.client.call(Release(holder, "db")) is True
    granted = last_push(node.client)
    assert isinstance(granted, Granted)
    assert (granted.session_id, granted.count) == (other, MAX_COUNT)
    assert "Acquire(count=2^64\u22121,\nephemeral=true)" in SECTION


# -- how long an ephemeral semaphore lives -----------------------------------------


async def test_an_ephemeral_semaphore_lives_while_owned_or_awaited(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire)
    holder, waiter = await node.session(), await node.session()
    await node.acquire(holder, "e", MAX_COUNT, ephemeral=True)
    await node.acquire(waiter, "e", MAX_COUNT, ephemeral=True)  # queued: request 2
    assert await node.client.call(Release(holder, "e")) is True  # the waiter owns it now
    assert isinstance(last_push(node.client), Granted)
    assert (await node.client.call(DescribeSemaphore(waiter, "e"))).description.ephemeral
    await node.acquire(holder, "e", MAX_COUNT, ephemeral=True)  # queued: request 3
    assert await node.client.call(Release(waiter, "e")) is True  # holder owns it again
    assert isinstance(last_push(node.client), Granted)
    assert await node.client.call(Release(holder, "e")) is True  # nobody left: gone
    failure = await node.client.fail(DescribeSemaphore(holder, "e"))
    assert failure.code is ErrorCode.NOT_FOUND


async def test_ephemeral_on_an_existing_semaphore_keeps_its_limit(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire)
    session = await node.session()
    await node.client.call(CreateSemaphore(session, "p", 3))
    await node.acquire(session, "p", 2, ephemeral=True)
    description = (await node.client.call(DescribeSemaphore(session, "p"))).description
    assert (description.limit, description.ephemeral) == (3, False)
    assert await node.client.call(Release(session, "p")) is True
    assert (await node.client.call(DescribeSemaphore(session, "p"))).description.count == 0


# -- node settings -----------------------------------------------------------------


def documented_defaults() -> dict[str, str]:
    rows = re.findall(r"^\| `(\w+)` \| (`[^`]*`|nil) \|", SECTION, flags=re.MULTILINE)
    return {name: default.strip("`") for name, default in rows}


def test_every_node_setting_and_its_default_is_documented() -> None:
    documented = documented_defaults()
    defaults = NodeConfig()
    assert list(documented) == [field.name for field in dataclasses.fields(NodeConfig)]
    for name, text in documented.items():
        value = getattr(defaults, name)
        assert text == ("nil" if value is None else repr(value).replace("_", "")), name


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("recovery_window", 0.0),
        ("recovery_window", 86400.5),
        ("lock_delay", -1.0),
        ("default_lease", 0.0),
        ("max_sessions", 0),
        ("max_missed_per_session", 0),
    ],
)
async def test_settings_out_of_range_are_invalid_argument(
    server: ServerProcess, wire: Clients, setting: str, value: object
) -> None:
    client = await wire.connect(server.port)
    bad = NodeConfig(**{setting: value})  # type: ignore[arg-type]
    failure = await client.fail(CreateNode(f"bad{next(_names)}", bad))
    assert failure.code is ErrorCode.INVALID_ARGUMENT
    assert setting in failure.message
    node = await new_node(server, wire)
    failure = await node.client.fail(AlterNode(node.name, {setting: value}))
    assert failure.code is ErrorCode.INVALID_ARGUMENT


async def test_settings_at_their_bounds_and_alter_semantics(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire, recovery_window=86400.0, lock_delay=0.0)
    early = await node.client.call(CreateSession(node.name, b"k", None))
    assert early.timeout == 86400.0  # nil: the node's recovery_window
    # An int for a float field is accepted; a float for a max_ field is not.
    changed = await node.client.call(AlterNode(node.name, {"recovery_window": 20}))
    assert changed.config.recovery_window == 20.0
    # Its name before the rename (what the wire carries) is the same setting; both
    # names at once are refused, and the connection goes on.
    both = {"session_timeout": 5.0, "recovery_window": 6.0}
    failure = await node.client.fail(AlterNode(node.name, both))
    assert failure.code is ErrorCode.INVALID_ARGUMENT
    assert "same setting" in failure.message
    failure = await node.client.fail(AlterNode(node.name, {"max_waiters": 1.5}))
    assert failure.code is ErrorCode.INVALID_ARGUMENT
    later = await node.client.call(CreateSession(node.name, b"k", None))
    assert later.timeout == 20.0
    # A lowered limit evicts nothing; it refuses the next one beyond it.
    await node.client.call(AlterNode(node.name, {"max_sessions": 1}))
    failure = await node.client.fail(CreateSession(node.name, b"k", None))
    assert failure.code is ErrorCode.LIMIT_EXCEEDED
    assert await node.client.call(CloseSession(early.session_id)) is None


# -- lock-delay --------------------------------------------------------------------


async def test_a_failed_holder_holds_grants_back_for_the_lock_delay(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire, lock_delay=3600.0)  # it will not pass in this test
    failed, waiter, released = await node.session(5.0), await node.session(), await node.session()
    await node.acquire(failed, "m", MAX_COUNT, ephemeral=True)
    await node.acquire(released, "r", MAX_COUNT, ephemeral=True)
    await node.acquire(waiter, "m", MAX_COUNT, ephemeral=True)  # queued behind the holder
    # The holder's client went silent for its whole window: it expires at once.
    await node.client.call(DetachSession(failed, silent_for=5.0))
    busy = await node.acquire(waiter, "m", 1, ephemeral=True, hold=1, timeout=0)
    assert busy.status is AcquireStatus.BUSY
    description = (
        await node.client.call(DescribeSemaphore(waiter, "m", owners=True, waiters=True))
    ).description
    # Free, not granted: the ephemeral semaphore stays for the delay, its waiter queued.
    assert (description.count, description.owners) == (0, ())
    assert [w.session_id for w in description.waiters] == [waiter]
    assert not [p for p in node.client.pushes if isinstance(p, Granted)]
    # A release starts no delay: the next one gets it at once.
    assert await node.client.call(Release(released, "r")) is True
    got = await node.acquire(waiter, "r", MAX_COUNT, ephemeral=True, timeout=0)
    assert got.status is AcquireStatus.GRANTED


def test_the_queue_is_served_when_the_lock_delay_ends() -> None:
    engine = Engine()
    engine.apply(CreateNode("n", NodeConfig(lock_delay=5.0)), 0.0)
    failed = engine.apply(CreateSession("n", b"k", 10.0), 0.0).session_id
    waiter = engine.apply(CreateSession("n", b"k", 10.0), 0.0).session_id
    engine.apply(Acquire(failed, "m", MAX_COUNT, 1, ephemeral=True), 0.0)
    engine.apply(Acquire(waiter, "m", MAX_COUNT, 2, ephemeral=True), 0.0)
    engine.apply(DetachSession(failed), 1.0)  # expires at 11
    engine.tick(11.0)
    engine.take_effects()
    engine.tick(15.999)
    assert not [e for e in engine.take_effects() if isinstance(e, Granted)]
    engine.tick(16.0)  # 5 s after the failure
    [granted] = [e for e in engine.take_effects() if isinstance(e, Granted)]
    assert granted.session_id == waiter


# -- restating a hold --------------------------------------------------------------


async def test_a_restate_without_more_tokens_keeps_the_token(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire)
    session, waiter = await node.session(), await node.session()
    await node.client.call(CreateSemaphore(session, "s", 4))
    first = await node.acquire(session, "s", 4, data=b"a", lease_ttl=60.0)
    await node.acquire(waiter, "s", 2)  # queued: needs 2 of the 4 held
    shrunk = await node.acquire(session, "s", 2, data=b"b", lease_ttl=5.0)
    assert shrunk.status is AcquireStatus.GRANTED
    assert shrunk.token == first.token
    assert shrunk.count == 2
    assert shrunk.lease_ttl == 60.0  # the grant's, not 5.0
    # The tokens given back went to the waiter, pushed before the reply.
    [granted] = [p for p in node.client.pushes if isinstance(p, Granted)]
    assert (granted.session_id, granted.count) == (waiter, 2)


async def test_an_upgrade_waits_keeping_the_old_grant_then_replaces_it(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire)
    session, other = await node.session(), await node.session()
    await node.client.call(CreateSemaphore(session, "s", 3))
    old = await node.acquire(session, "s", 1, data=b"old")
    await node.acquire(other, "s", 2)
    busy = await node.acquire(session, "s", 2, timeout=0)
    assert busy.status is AcquireStatus.BUSY
    upgrade = await node.acquire(session, "s", 2, data=b"new")
    assert upgrade.status is AcquireStatus.QUEUED
    description = (await node.client.call(DescribeSemaphore(session, "s", owners=True))).description
    mine = [o for o in description.owners if o.session_id == session]
    assert [(o.count, o.data, o.token) for o in mine] == [(1, b"old", old.token)]
    assert await node.client.call(Release(other, "s")) is True
    granted = last_push(node.client)
    assert isinstance(granted, Granted)
    assert granted.count == 2  # the new total, not 1 + 2
    assert old.token is not None
    assert granted.token > old.token
    description = (await node.client.call(DescribeSemaphore(session, "s", owners=True))).description
    assert [(o.count, o.token) for o in description.owners] == [(2, granted.token)]


async def test_an_upgrade_that_ends_without_a_grant_leaves_the_old_one(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire)
    session, other = await node.session(), await node.session()
    await node.client.call(CreateSemaphore(session, "s", 2))
    old = await node.acquire(session, "s", 1)
    await node.acquire(other, "s", 1)
    await node.acquire(session, "s", 2)  # queued upgrade: request 3
    assert await node.client.call(CancelAcquire(session, "s", 3)) is True
    failed = last_push(node.client)
    assert isinstance(failed, AcquireFailed)
    assert failed.code is ErrorCode.CANCELLED
    description = (await node.client.call(DescribeSemaphore(session, "s", owners=True))).description
    mine = [(o.count, o.token) for o in description.owners if o.session_id == session]
    assert mine == [(1, old.token)]


# -- errors of Acquire and Renew ---------------------------------------------------


async def test_the_codes_acquire_fails_with(server: ServerProcess, wire: Clients) -> None:
    node = await new_node(server, wire, max_data_size=8)
    session = await node.session()
    await node.client.call(CreateSemaphore(session, "s", 2))
    assert await node.acquire_fails(session, "s", 3) == ErrorCode.LIMIT_EXCEEDED
    assert await node.acquire_fails(session, "s", 0) == ErrorCode.INVALID_ARGUMENT
    assert await node.acquire_fails(session, "s", 1, timeout=-1.0) == ErrorCode.INVALID_ARGUMENT
    assert await node.acquire_fails(session, "s", 1, data=b"x" * 9) == ErrorCode.LIMIT_EXCEEDED
    assert await node.acquire_fails(session, "missing", 1) == ErrorCode.NOT_FOUND


async def test_the_codes_renew_fails_with(server: ServerProcess, wire: Clients) -> None:
    node = await new_node(server, wire)
    session = await node.session()
    await node.acquire(session, "leased", MAX_COUNT, ephemeral=True, lease_ttl=30.0)
    assert await node.client.call(Renew(session, "leased")) == 30.0
    assert await node.client.call(Renew(session, "leased", 45.0)) == 45.0
    failure = await node.client.fail(Renew(session, "leased", -1.0))
    assert failure.code is ErrorCode.INVALID_ARGUMENT
    failure = await node.client.fail(Renew(session, "leased", hold=1))  # never granted
    assert failure.code is ErrorCode.NOT_FOUND
    await node.acquire(session, "plain", MAX_COUNT, ephemeral=True)
    failure = await node.client.fail(Renew(session, "plain"))
    assert failure.code is ErrorCode.PRECONDITION_FAILED
    assert await node.client.call(Release(session, "leased")) is True
    failure = await node.client.fail(Renew(session, "leased"))  # released
    assert failure.code is ErrorCode.NOT_FOUND
    other = await wire.connect(server.port)
    failure = await other.fail(Renew(session, "plain"))  # not this connection's
    assert failure.code is ErrorCode.PERMISSION_DENIED
    await node.client.call(CloseSession(session))
    failure = await node.client.fail(Renew(session, "plain"))  # ended
    assert failure.code is ErrorCode.PERMISSION_DENIED


async def test_a_data_restate_applies_during_a_lock_delay(
    server: ServerProcess, wire: Clients
) -> None:
    node = await new_node(server, wire, lock_delay=3600.0)
    keeper, failed = await node.session(), await node.session(5.0)
    await node.client.call(CreateSemaphore(keeper, "s", 2))
    kept = await node.acquire(keeper, "s", 1, data=b"a")
    await node.acquire(failed, "s", 1)
    await node.client.call(DetachSession(failed, silent_for=5.0))  # expired: delay runs
    again = await node.acquire(keeper, "s", 1, data=b"b", timeout=0)
    assert again.status is AcquireStatus.GRANTED
    assert again.token == kept.token
    await node.client.call(UpdateSemaphore(keeper, "s", b"still works"))
