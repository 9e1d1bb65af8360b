"""@tenure.locked: an async function run holding a mutex named from its call (memory://).

The names (templates over the bound arguments, refused at decoration or at the call
before anything is sent), the default session the calls share and replace once it
is lost, timeout and blocking=False, reentrancy, a loss cancelling the function, and
tenure.current_lock(). The sync twin: tests/sync/test_locked.py.
"""

from __future__ import annotations

import asyncio
import gc
import uuid
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import date

import pytest

import tenure
from tenure.errors import (
    ConfigError,
    InvalidArgumentError,
    PreconditionFailedError,
    SessionExpiredError,
)
from tenure.testing.conformance.support import wait_for_waiters

NODE = "locked"


@dataclass
class Report:
    id: int
    pages: list[str]


@pytest.fixture(autouse=True)
async def client(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tenure.Client]:
    """The default backend: a memory:// name of this test's own, node NODE."""
    monkeypatch.delenv("TENURE_URL", raising=False)
    monkeypatch.delenv("TENURE_NODE", raising=False)
    tenure.configure(f"memory://locked-{uuid.uuid4().hex}", node=NODE)
    client = await tenure.default_client()
    await client.create_node(NODE)
    yield client
    await tenure.close_default_client()
    tenure.configure()


async def test_the_name_is_formatted_from_the_bound_arguments() -> None:
    @tenure.locked("report-{report.id}-{kind}-{report.pages[0]}-{day:%Y%m%d}")
    async def build(report: Report, kind: str = "full", *, day: date) -> str:
        return tenure.current_lock().name

    report = Report(7, ["cover"])
    expected = "report-7-full-cover-20260102"
    assert await build(report, day=date(2026, 1, 2)) == expected
    assert await build(day=date(2026, 1, 2), report=report) == expected
    assert await build(report, "draft", day=date(2026, 1, 2)) == expected.replace("full", "draft")

    @tenure.locked("nightly {{batch}}")  # a constant name; {{ is a brace
    async def nightly() -> str:
        return tenure.current_lock().name

    assert await nightly() == "nightly {batch}"

    @tenure.locked("{args[1]}/{kwargs[region]}/{width:>{pad}}")  # a field nested in a spec
    async def spread(width: int, pad: int, *args: str, **kwargs: str) -> str:
        return tenure.current_lock().name

    assert await spread(7, 3, "a", "b", region="eu") == "b/eu/  7"


def test_a_field_that_names_no_parameter_is_refused_at_decoration() -> None:
    async def build(report: Report) -> None: ...

    for template, words in [
        ("report-{reprot.id}", "field {reprot.id} names no parameter of"),
        ("report-{}", "positional"),
        ("report-{0}", "positional"),
        ("report-{report.id", "not a format string"),
        ("report-}", "not a format string"),
        ("report-{report!x}", "unknown conversion"),
        ("report-{report:{width}}", "field {width} names no parameter"),
    ]:
        with pytest.raises(InvalidArgumentError, match="lock name") as refused:
            tenure.locked(template)(build)
        assert words in str(refused.value)
        assert template in str(refused.value)


def test_bad_arguments_and_functions_are_refused_at_decoration() -> None:
    with pytest.raises(InvalidArgumentError, match="non-empty str"):
        tenure.locked("")
    with pytest.raises(InvalidArgumentError, match="timeout"):
        tenure.locked("x", timeout=-1)
    with pytest.raises(InvalidArgumentError, match="blocking=False only tries"):
        tenure.locked("x", timeout=5, blocking=False)
    with pytest.raises(InvalidArgumentError, match="blocking"):
        tenure.locked("x", blocking="no")  # type: ignore[call-overload]
    with pytest.raises(InvalidArgumentError, match="node"):
        tenure.locked("x", node="")
    with pytest.raises(InvalidArgumentError, match=r"client must be a tenure.Client"):
        tenure.locked("x", client="memory://")  # type: ignore[call-overload]
    with pytest.raises(InvalidArgumentError, match="semaphore name"):
        tenure.locked("x" * 10_000)(_noop)  # a constant name is checked at once

    def plain() -> None: ...

    async def generator() -> AsyncIterator[int]:
        yield 1

    with pytest.raises(TypeError, match=r"decorate a plain function with tenure.sync.locked"):
        tenure.locked("x")(plain)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async generator"):
        tenure.locked("x")(generator)  # type: ignore[arg-type]


async def _noop() -> None: ...


async def test_an_unformattable_value_is_refused_at_the_call_before_anything_is_sent() -> None:
    # An unreachable backend: an error other than UnavailableError proves nothing was sent.
    tenure.configure("tenure://127.0.0.1:1?connect_timeout=0.2", node=NODE)

    @tenure.locked("report-{report.id}-{report.pages[3]}-{day:%Y}")
    async def build(report: Report, day: object = None) -> None:
        raise AssertionError("must not run")

    with pytest.raises(InvalidArgumentError) as refused:
        await build(object())  # type: ignore[arg-type]
    assert "'report-{report.id}-{report.pages[3]}-{day:%Y}'" in str(refused.value)
    assert "cannot read field {report.id}: AttributeError" in str(refused.value)
    with pytest.raises(InvalidArgumentError, match=r"cannot read field \{report.pages\[3\]\}"):
        await build(Report(1, []))
    with pytest.raises(InvalidArgumentError, match=r"cannot format field \{day\}: ValueError"):
        await build(Report(1, ["a"] * 4), day=3)

    @tenure.locked("report-{title}")
    async def titled(title: str) -> None:
        raise AssertionError("must not run")

    with pytest.raises(InvalidArgumentError, match="made 'report-xxx"):
        await titled("x" * 10_000)  # too long a name
    with pytest.raises(TypeError, match="missing a required argument: 'title'"):
        await titled()  # type: ignore[call-arg]


async def test_calls_of_one_name_take_turns_and_other_names_run_alongside(
    client: tenure.Client,
) -> None:
    inside: list[str] = []
    release, entered = asyncio.Event(), asyncio.Event()

    @tenure.locked("report-{report_id}")
    async def build(report_id: int, step: str) -> tuple[int, int]:
        inside.append(step)
        if step == "first":
            entered.set()
            await release.wait()
        lock = tenure.current_lock()
        return lock.token, lock.session.id

    first = asyncio.create_task(build(1, "first"))
    await entered.wait()
    queued = asyncio.create_task(build(1, "queued"))
    session = await tenure.default_session()
    await wait_for_waiters(session, "report-1", 1)  # it queues, in the same session
    other = await build(2, "other")  # another name: runs while report-1 is held
    mutex = session.mutex("report-1")
    assert inside == ["first", "other"]
    release.set()
    (first_token, first_session), (queued_token, queued_session) = await asyncio.gather(
        first, queued
    )
    assert inside == ["first", "other", "queued"]
    assert first_token < other[0] < queued_token
    # Every call held its lock in the one default session.
    assert first_session == queued_session == other[1] == session.id
    assert not (await mutex.describe()).held  # released when the call returned


async def test_timeout_and_blocking_false_when_the_lock_is_held_elsewhere(
    client: tenure.Client,
) -> None:
    ran: list[str] = []

    @tenure.locked("ledger", timeout=0.05)
    async def patient() -> None:
        ran.append("patient")

    @tenure.locked("ledger", blocking=False)
    async def skipping() -> str:
        ran.append("skipping")
        return "ran"

    async with client.session(NODE) as other, other.mutex("ledger"):
        with pytest.raises(TimeoutError):
            await patient()
        assert await skipping() is None  # skipped: the function did not run
    assert ran == []
    assert await skipping() == "ran"
    await patient()
    assert ran == ["skipping", "patient"]


async def test_a_loss_cancels_the_function_and_the_next_call_opens_a_new_session(
    client: tenure.Client,
) -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    @tenure.locked("job")
    async def job() -> int:
        started.set()
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return 0

    @tenure.locked("job")
    async def quick() -> int:
        return tenure.current_lock().session.id

    running = asyncio.create_task(job())
    await started.wait()
    lost = await tenure.default_session()
    await client.kill_session(NODE, lost.id)
    with pytest.raises(SessionExpiredError):
        await running
    assert cancelled == [True]
    assert lost.closed
    replacement = await quick()  # not failing forever: a new default session
    assert replacement != lost.id
    assert (await tenure.default_session()).id == replacement


async def test_reentrant_nests_and_a_plain_nested_call_is_refused() -> None:
    @tenure.locked("account-{account}", reentrant=True)
    async def transfer(account: str, depth: int) -> list[int]:
        token = tenure.current_lock().token
        return [token] + (await transfer(account, depth - 1) if depth else [])

    tokens = await transfer("a", 2)
    assert len(tokens) == 3
    assert len(set(tokens)) == 1

    @tenure.locked("account-{account}")
    async def plain(account: str, again: bool) -> None:
        if again:
            await plain(account, False)

    with pytest.raises(PreconditionFailedError):
        await plain("b", True)
    await plain("b", False)  # the refused nested call left nothing held


async def test_current_lock_is_the_innermost_call_and_only_there() -> None:
    with pytest.raises(PreconditionFailedError, match=r"no @tenure.locked function"):
        tenure.current_lock()

    @tenure.locked("inner")
    async def inner() -> str:
        return tenure.current_lock().name

    @tenure.locked("outer")
    async def outer() -> list[str]:
        names = [tenure.current_lock().name, await inner(), tenure.current_lock().name]
        # A task started inside sees it too (its context is a copy).
        names.append(await asyncio.create_task(_current_name()))
        return names

    assert await outer() == ["outer", "inner", "outer", "outer"]
    with pytest.raises(PreconditionFailedError):
        tenure.current_lock()


async def _current_name() -> str:
    return tenure.current_lock().name


async def test_the_owner_data_names_the_function_and_errors_release_the_lock(
    client: tenure.Client,
) -> None:
    class BuildError(Exception):
        pass

    @tenure.locked("report")
    async def build() -> None:
        owner = (await (await tenure.default_session()).mutex("report").describe()).owner
        assert owner is not None
        assert owner.data == f"{__name__}.{build.__qualname__}".encode()
        raise BuildError

    @tenure.locked("labelled", data=b"nightly run 42")
    async def labelled() -> bytes:
        owner = (await (await tenure.default_session()).mutex("labelled").describe()).owner
        assert owner is not None
        return owner.data

    with pytest.raises(BuildError):
        await build()
    assert not (await (await tenure.default_session()).mutex("report").describe()).held
    assert await labelled() == b"nightly run 42"
    assert build.__name__ == "build"
    assert build.__wrapped__.__name__ == "build"  # type: ignore[attr-defined]


async def test_node_and_client_overrides_and_methods() -> None:
    async with tenure.connect(f"memory://locked-other-{uuid.uuid4().hex}") as other:
        await other.create_node("elsewhere")

        class Ledger:
            def __init__(self, name: str) -> None:
                self.name = name

            @tenure.locked("ledger-{self.name}", client=other, node="elsewhere")
            async def post(self) -> tenure.Lock:
                return tenure.current_lock()

        lock = await Ledger("eu").post()
        assert lock.name == "ledger-eu"
        session = await tenure.default_session("elsewhere", client=other)
        assert lock.session is session
        assert session.node == "elsewhere"
        assert session.description == "tenure default session"


async def test_the_default_session_is_shared_and_replaced_once_closed(
    client: tenure.Client,
) -> None:
    first, second = await asyncio.gather(tenure.default_session(), tenure.default_session())
    assert first is second
    await first.close()
    replacement = await tenure.default_session()
    assert replacement is not first
    assert not replacement.closed
    with pytest.raises(InvalidArgumentError, match=r"client must be a tenure.Client"):
        await tenure.default_session(client="memory://")  # type: ignore[arg-type]
    with pytest.raises(tenure.errors.NotFoundError):
        await tenure.default_session("no-such-node")
    await tenure.close_default_client()
    assert replacement.closed
    fresh = await tenure.default_session()  # a new client, a new session
    assert fresh is not replacement
    assert not fresh.closed


async def test_the_default_sessions_of_a_closed_client_do_not_keep_it() -> None:
    other = await tenure.connect(f"memory://locked-gone-{uuid.uuid4().hex}")
    await other.create_node("elsewhere")
    await tenure.default_session("elsewhere", client=other)
    gone = weakref.ref(other)
    await other.aclose()
    del other
    await tenure.default_session()  # opening a session lets the closed clients' go
    gc.collect()
    assert gone() is None


async def test_nothing_configured_is_a_config_error_at_the_call() -> None:
    tenure.configure()

    @tenure.locked("x")
    async def work() -> None: ...

    with pytest.raises(ConfigError, match="TENURE_URL"):
        await work()
