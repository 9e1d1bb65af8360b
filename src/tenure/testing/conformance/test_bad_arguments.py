"""Bad input is refused: each public call's bad argument, one InvalidArgumentError everywhere.

Names, counts, timeouts, recovery windows, descriptions, data and node settings out
of range are refused before anything is sent, and one bad argument of each public
call raises the same class and message on every backend as in the in-process
engine (the refusals of state, limits and lost things: ``test_errors.py``).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import tenure
from tenure.errors import (
    InvalidArgumentError,
    NotFoundError,
    TenureError,
)
from tenure.testing import FakeClock

from .harness import Harness

BAD_NAMES: list[Any] = ["", "tab\there", "nul\x00", "x" * 1025, 42, None, b"bytes"]
BAD_COUNTS: list[Any] = [0, -1, 2**64, 1.5, True, "1"]
BAD_TIMEOUTS: list[Any] = [-1, -0.5, math.nan, math.inf, "5", True]
BAD_WINDOWS: list[Any] = [0, -1, math.nan, math.inf, 10**6, "15"]

# -- invalid arguments ----------------------------------------------------------------


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
async def test_bad_node_names(client: tenure.Client, name: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        await client.create_node(name)
    with pytest.raises(InvalidArgumentError):
        await client.session(name)


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
async def test_bad_semaphore_names(client: tenure.Client, node: str, name: Any) -> None:
    session = await client.session(node)
    with pytest.raises(InvalidArgumentError):
        await session.semaphore(name).create(limit=1)
    with pytest.raises(InvalidArgumentError):
        await session.semaphore(name).acquire(ephemeral=True)
    with pytest.raises(InvalidArgumentError):
        await session.mutex(name).lock()
    with pytest.raises(InvalidArgumentError):
        await session.election(name).campaign(b"")
    assert (await client.describe_node(node)).semaphores == 0


@pytest.mark.parametrize("count", BAD_COUNTS, ids=repr)
async def test_bad_counts_and_limits(client: tenure.Client, node: str, count: Any) -> None:
    session = await client.session(node)
    with pytest.raises(InvalidArgumentError):
        await session.semaphore("pool").create(limit=count)
    await session.semaphore("pool").create(limit=5)
    with pytest.raises(InvalidArgumentError):
        await session.semaphore("pool").acquire(count=count)
    with pytest.raises(InvalidArgumentError):
        await session.semaphore("pool").try_acquire(count=count)
    assert (await session.semaphore("pool").describe()).count == 0


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
async def test_bad_timeouts(client: tenure.Client, node: str, timeout: Any) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=1)
    with pytest.raises(InvalidArgumentError):
        await session.semaphore("pool").acquire(timeout=timeout)
    with pytest.raises(InvalidArgumentError):
        await session.mutex("job").lock(timeout=timeout)
    with pytest.raises(InvalidArgumentError):
        await session.election("primary").campaign(b"", timeout=timeout)
    # Nothing was left behind: the next acquire is served at once.
    assert await session.mutex("job").try_lock() is not None


@pytest.mark.parametrize("window", BAD_WINDOWS, ids=repr)
async def test_bad_recovery_windows(client: tenure.Client, node: str, window: Any) -> None:
    with pytest.raises(InvalidArgumentError):
        await client.session(node, recovery_window=window)
    assert (await client.describe_node(node)).sessions == 0


async def test_bad_descriptions_and_data(client: tenure.Client, node: str) -> None:
    with pytest.raises(InvalidArgumentError):
        await client.session(node, description="x" * 1025)
    session = await client.session(node)
    not_bytes: Any = "text"
    with pytest.raises(InvalidArgumentError):
        await session.semaphore("pool").create(limit=1, data=not_bytes)
    with pytest.raises(InvalidArgumentError):
        await session.semaphore("pool").acquire(ephemeral=True, data=not_bytes)
    with pytest.raises(InvalidArgumentError):
        await session.mutex("job").lock(data=3)  # type: ignore[arg-type]
    assert await session.mutex("job").try_lock(data=b"ok") is not None


async def test_bad_node_settings(client: tenure.Client, node: str) -> None:
    for settings in (
        {"no_such_setting": 1},
        {"recovery_window": 0},
        {"lock_delay": -1.0},
        {"max_waiters": 0},
        {"max_sessions": 1.5},
    ):
        with pytest.raises(InvalidArgumentError):
            await client.create_node(node + "-2", **settings)
        with pytest.raises(InvalidArgumentError):
            await client.alter_node(node, **settings)
    assert (await client.describe_node(node)).config == tenure.NodeConfig()
    with pytest.raises(NotFoundError):
        await client.describe_node(node + "-2")


# -- one bad argument, one error: the same class and message on every backend ----------


@dataclass(frozen=True)
class Bad:
    """One public call with one bad argument, and the word its message must contain."""

    id: str
    call: Callable[[Any, str, Any], object]  # (client, node, session): Any lets bad values in
    names: str  # the argument, as the caller wrote it (or its setting's name)


BAD_ARGUMENTS: list[Bad] = [
    # Client
    Bad("create_node(name=42)", lambda c, n, s: c.create_node(42), "name"),
    Bad("create_node(config=dict)", lambda c, n, s: c.create_node("x", {"a": 1}), "config"),
    Bad("create_node(exist_ok=1)", lambda c, n, s: c.create_node(n, exist_ok=1), "exist_ok"),
    Bad(
        "create_node(recovery_window=0)",
        lambda c, n, s: c.create_node("x", recovery_window=0),
        "recovery_window",
    ),
    Bad("create_node(colour=)", lambda c, n, s: c.create_node("x", colour="blue"), "colour"),
    Bad("describe_node(name='')", lambda c, n, s: c.describe_node(""), "name"),
    Bad("alter_node(name=None)", lambda c, n, s: c.alter_node(None, lock_delay=1.0), "name"),
    Bad("alter_node(max_waiters=0)", lambda c, n, s: c.alter_node(n, max_waiters=0), "max_waiters"),
    Bad(
        "alter_node(lock_delay='1')", lambda c, n, s: c.alter_node(n, lock_delay="1"), "lock_delay"
    ),
    Bad("alter_node(colour=)", lambda c, n, s: c.alter_node(n, colour="blue"), "colour"),
    Bad("drop_node(force=1)", lambda c, n, s: c.drop_node(n, force=1), "force"),
    Bad("session(node=42)", lambda c, n, s: c.session(42), "node"),
    Bad(
        "session(recovery_window=-1)",
        lambda c, n, s: c.session(n, recovery_window=-1),
        "recovery_window",
    ),
    Bad(
        "session(recovery_window='15')",
        lambda c, n, s: c.session(n, recovery_window="15"),
        "recovery_window",
    ),
    Bad(
        "session(recovery_window=10**6)",
        lambda c, n, s: c.session(n, recovery_window=10**6),
        "recovery_window",
    ),
    Bad("session(description=3)", lambda c, n, s: c.session(n, description=3), "description"),
    Bad(
        "session(description=long)",
        lambda c, n, s: c.session(n, description="x" * 1025),
        "description",
    ),
    Bad(
        "session(description=surrogate)",
        lambda c, n, s: c.session(n, description="\ud800"),
        "description",
    ),
    Bad(
        "sessions(recovery_window=0)",
        lambda c, n, s: c.sessions(n, recovery_window=0),
        "recovery_window",
    ),
    Bad("sessions(node='')", lambda c, n, s: c.sessions(""), "node"),
    # Semaphore
    Bad("semaphore(name=42)", lambda c, n, s: s.semaphore(42).create(limit=1), "name"),
    Bad("semaphore(name=long)", lambda c, n, s: s.semaphore("x" * 1025).describe(), "name"),
    Bad("create(limit=0)", lambda c, n, s: s.semaphore("p").create(limit=0), "limit"),
    Bad("create(limit=-1)", lambda c, n, s: s.semaphore("p").create(limit=-1), "limit"),
    Bad("create(limit=2**64)", lambda c, n, s: s.semaphore("p").create(limit=2**64), "limit"),
    Bad("create(limit='1')", lambda c, n, s: s.semaphore("p").create(limit="1"), "limit"),
    Bad("create(limit=True)", lambda c, n, s: s.semaphore("p").create(limit=True), "limit"),
    Bad("create(data='x')", lambda c, n, s: s.semaphore("p").create(1, "x"), "data"),
    Bad(
        "create(exist_ok='no')",
        lambda c, n, s: s.semaphore("p").create(1, exist_ok="no"),
        "exist_ok",
    ),
    Bad("acquire(count=-1)", lambda c, n, s: s.semaphore("q").acquire(count=-1), "count"),
    Bad("acquire(count=0)", lambda c, n, s: s.semaphore("q").acquire(count=0), "count"),
    Bad("acquire(count=2**64)", lambda c, n, s: s.semaphore("q").acquire(count=2**64), "count"),
    Bad("acquire(count=1.5)", lambda c, n, s: s.semaphore("q").acquire(count=1.5), "count"),
    Bad("acquire(count=True)", lambda c, n, s: s.semaphore("q").acquire(count=True), "count"),
    Bad("acquire(data=3)", lambda c, n, s: s.semaphore("q").acquire(data=3), "data"),
    Bad("acquire(timeout=-1)", lambda c, n, s: s.semaphore("q").acquire(timeout=-1), "timeout"),
    Bad(
        "acquire(timeout=nan)",
        lambda c, n, s: s.semaphore("q").acquire(timeout=math.nan),
        "timeout",
    ),
    Bad(
        "acquire(timeout='5')",
        lambda c, n, s: s.semaphore("q").acquire(timeout="5"),
        "timeout",
    ),
    Bad(
        "acquire(ephemeral=1)",
        lambda c, n, s: s.semaphore("q").acquire(ephemeral=1),
        "ephemeral",
    ),
    Bad("try_acquire(count=-1)", lambda c, n, s: s.semaphore("q").try_acquire(count=-1), "count"),
    Bad(
        "try_acquire(data='x')",
        lambda c, n, s: s.semaphore("q").try_acquire(data="x"),
        "data",
    ),
    Bad(
        "try_acquire(ephemeral='y')",
        lambda c, n, s: s.semaphore("q").try_acquire(ephemeral="y"),
        "ephemeral",
    ),
    Bad("describe(owners=1)", lambda c, n, s: s.semaphore("q").describe(owners=1), "owners"),
    Bad(
        "describe(waiters='y')",
        lambda c, n, s: s.semaphore("q").describe(waiters="y"),
        "waiters",
    ),
    Bad("update(data='x')", lambda c, n, s: s.semaphore("q").update("x"), "data"),
    Bad("delete(force=1)", lambda c, n, s: s.semaphore("q").delete(force=1), "force"),
    Bad("watch(data=1)", lambda c, n, s: s.semaphore("q").watch(data=1), "data"),
    Bad("watch(owners=1)", lambda c, n, s: s.semaphore("q").watch(owners=1), "owners"),
    Bad("watch(waiters=1)", lambda c, n, s: s.semaphore("q").watch(waiters=1), "waiters"),
    # Mutex
    Bad("mutex(name='')", lambda c, n, s: s.mutex("").lock(), "name"),
    Bad("lock(timeout=-1)", lambda c, n, s: s.mutex("m").lock(timeout=-1), "timeout"),
    Bad("lock(timeout=inf)", lambda c, n, s: s.mutex("m").lock(timeout=math.inf), "timeout"),
    Bad("lock(data='x')", lambda c, n, s: s.mutex("m").lock(data="x"), "data"),
    Bad("try_lock(data=1)", lambda c, n, s: s.mutex("m").try_lock(data=1), "data"),
    # Election
    Bad("election(name=None)", lambda c, n, s: s.election(None).leader(), "name"),
    Bad("campaign(data='x')", lambda c, n, s: s.election("e").campaign("x"), "data"),
    Bad(
        "campaign(timeout=-1)", lambda c, n, s: s.election("e").campaign(b"", timeout=-1), "timeout"
    ),
]


async def _refusal(client: tenure.Client, node: str, bad: Bad) -> InvalidArgumentError:
    """Make the call of ``bad`` in a fresh session; the error it raised (at once or awaited)."""
    async with client.session(node) as session:
        await session.semaphore("q").create(limit=5)
        with pytest.raises(InvalidArgumentError) as raised:
            await _call(bad, client, node, session)
    return raised.value


async def _call(bad: Bad, client: tenure.Client, node: str, session: tenure.Session) -> None:
    result = bad.call(client, node, session)  # raises here: checked before the await
    if inspect.isawaitable(result):
        await result


@pytest.mark.parametrize("bad", BAD_ARGUMENTS, ids=lambda bad: bad.id)
async def test_a_bad_argument_raises_the_same_invalid_argument_error_on_every_backend(
    client: tenure.Client, node: str, bad: Bad
) -> None:
    error = await _refusal(client, node, bad)
    async with tenure.connect("memory://") as reference:
        await reference.create_node(node)
        expected = await _refusal(reference, node, bad)

    assert type(error) is InvalidArgumentError  # not a subclass of the backend's (codec...)
    assert bad.names in str(error), f"{str(error)!r} does not name {bad.names}"
    assert str(error) == str(expected)  # the same words as the in-process engine's
    description = await client.describe_node(node)
    assert (description.sessions, description.semaphores) == (0, 1)  # only "q": nothing new


async def test_a_bad_proclaim_changes_nothing(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    leadership = await session.election("e").campaign(b"me")
    with pytest.raises(InvalidArgumentError, match="data must be bytes"):
        await leadership.proclaim("text")  # type: ignore[arg-type]
    assert leadership.held
    assert leadership.data == b"me"


@pytest.mark.parametrize("require", [["watch"], "fifo", 3, [tenure.Capability.FIFO, None]])
async def test_connect_refuses_a_require_that_is_not_capabilities(
    backend: Harness, state_clock: FakeClock | None, state_name: str, require: Any
) -> None:
    url, options = backend.url(state_name), backend.options(state_clock)
    with pytest.raises(InvalidArgumentError, match="require must be Capability values"):
        await tenure.connect(url, require=require, **options)


def test_invalid_argument_is_also_a_value_error() -> None:
    assert issubclass(InvalidArgumentError, ValueError)
    assert issubclass(InvalidArgumentError, TenureError)
