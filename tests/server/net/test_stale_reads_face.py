"""The native face's answers to reads from a standby (tenure.server._net.stale_reads),
in this process with stand-ins for the server's parts: a failure of its own is a
refusal the client can go elsewhere with, a server that stops gives up what waits,
and a role that no longer follows sends the client to the leader."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tenure._core import ListNodes
from tenure._core.commands import NodePage
from tenure._protocol import Failure, Reply, Request, State
from tenure.errors import ErrorCode, LimitExceededError
from tenure.server._net.stale_reads import StaleReads
from tests.core.support import make_engine


class Fresh:
    """A freshness that answers as told: an index, an error, or never."""

    def __init__(self, answer: Any, *, held: bool = False) -> None:
        self.answer = answer
        self.applied = 7
        self.asked: list[tuple[float, int]] = []
        self.held = held  # (confirmed already: answered in the turn, no task)
        self.held_asked: list[tuple[float, int]] = []

    def holds(self, max_staleness: float, min_index: int = 0) -> bool:
        self.held_asked.append((max_staleness, min_index))
        return self.held

    async def within(self, max_staleness: float, min_index: int = 0, *, timeout: float) -> int:
        self.asked.append((max_staleness, min_index))
        if isinstance(self.answer, asyncio.Event):
            await self.answer.wait()
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.applied


class Parts:
    """The host, gate, outboxes and connection a StaleReads needs, and what it said."""

    def __init__(self, freshness: Fresh | None) -> None:
        self.engine = make_engine()
        self.step_budget = 1000
        self.role = self
        self.freshness = freshness
        self.places = None  # (the role's: a server of no cell)
        self.said: list[Any] = []
        self.token = None
        self.closing = False
        self.codec = self
        self.state = State.OPEN
        self.transport = self
        self.answering: asyncio.Task[None] | None = None
        self.counted: list[tuple[str, ErrorCode | None]] = []
        self.refusal: Exception | None = None  # (what admit_request raises)

    # the observer's
    def request(self, command: Any, code: ErrorCode | None) -> None:
        self.counted.append((type(command).__name__, code))

    # the host's
    def admit_request(self, actor: str) -> None:
        if self.refusal is not None:
            raise self.refusal

    def wall_shift(self) -> float:
        return 0.0

    # the role's
    def leader(self, face: str = "native") -> str | None:
        return "t1:6388"

    # the connection's transport
    def is_closing(self) -> bool:
        return False

    # the outboxes' and the face's
    def emit(self, conn: Any, message: Any) -> None:
        self.said.append(message)

    def fail(self, conn: Any, request: Request, code: ErrorCode, why: str) -> None:
        self.said.append(Failure(request.request_id, code, why))


def _reads(parts: Parts) -> StaleReads:
    owner = lambda session_id: None  # noqa: E731
    return StaleReads(parts, parts, parts, owner, parts.fail, 1.0, parts)  # type: ignore[arg-type]


async def _answered(parts: Parts, reads: StaleReads) -> Any:
    reads.answer(parts, Request(1, ListNodes(), max_staleness=0.5, min_index=3))  # type: ignore[arg-type]
    task = parts.answering
    assert task is not None
    await task
    assert parts.answering is None  # (the connection's next frames are read again)
    [said] = parts.said
    return said


async def test_a_fresh_read_is_answered_with_the_index_its_state_held() -> None:
    fresh = Fresh(7)
    parts = Parts(fresh)
    said = await _answered(parts, _reads(parts))
    assert isinstance(said, Reply)
    assert isinstance(said.value, NodePage)
    assert said.value.names == ("n",)
    assert said.index == 7
    assert fresh.asked == [(0.5, 3)]
    assert parts.counted == [("ListNodes", None)]  # (a request answered, as any)


async def test_a_read_of_a_state_confirmed_already_is_answered_in_the_turn() -> None:
    """No task, no wait: the connection's next frame is read at once (a confirmation
    serves every read of its bound after it: under load, most reads)."""
    fresh = Fresh(asyncio.Event(), held=True)  # (a wait would never end)
    parts = Parts(fresh)
    _reads(parts).answer(parts, Request(1, ListNodes(), max_staleness=0.5, min_index=3))  # type: ignore[arg-type]
    assert parts.answering is None
    [said] = parts.said
    assert isinstance(said, Reply)
    assert said.value == NodePage(("n",))
    assert said.index == 7
    assert fresh.held_asked == [(0.5, 3)]
    assert fresh.asked == []
    assert parts.counted == [("ListNodes", None)]


@pytest.mark.parametrize("held", [True, False])
async def test_a_token_over_its_rate_is_refused_either_way(held: bool) -> None:
    """The token's rate is paid by a read answered in the turn as by one that waits."""
    parts = Parts(Fresh(7, held=held))
    parts.token = type("Token", (), {"name": "t", "nodes": None})()
    parts.refusal = LimitExceededError("token 't' is over its requests_per_second")
    reads = _reads(parts)
    reads.answer(parts, Request(1, ListNodes(), max_staleness=0.5))  # type: ignore[arg-type]
    if parts.answering is not None:
        await parts.answering
    [said] = parts.said
    assert isinstance(said, Failure)
    assert said.code is ErrorCode.LIMIT_EXCEEDED


@pytest.mark.parametrize("held", [True, False])
async def test_a_bad_bound_is_refused_never_answered_in_the_turn(held: bool) -> None:
    parts = Parts(Fresh(7, held=held))
    reads = _reads(parts)
    for request_id, bound in enumerate([-1.0, float("nan"), float("inf")], 1):
        reads.answer(parts, Request(request_id, ListNodes(), max_staleness=bound))  # type: ignore[arg-type]
        if parts.answering is not None:
            await parts.answering
    assert [type(said) for said in parts.said] == [Failure] * 3
    assert {said.code for said in parts.said} == {ErrorCode.INVALID_ARGUMENT}


async def test_a_failure_of_its_own_is_a_refusal_to_go_elsewhere_with(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parts = Parts(Fresh(RuntimeError("etcd's answer was unreadable")))
    said = await _answered(parts, _reads(parts))
    assert isinstance(said, Failure)
    assert said.code is ErrorCode.UNAVAILABLE
    assert "a read from this standby failed unexpectedly" in caplog.text


async def test_a_server_no_longer_following_sends_the_client_to_the_leader() -> None:
    parts = Parts(None)
    said = await _answered(parts, _reads(parts))
    assert isinstance(said, Failure)
    assert said.code is ErrorCode.NOT_LEADER
    assert "t1:6388" in said.message


async def test_a_stopping_server_gives_up_the_reads_that_wait() -> None:
    parts = Parts(Fresh(asyncio.Event()))  # (never confirmed)
    reads = _reads(parts)
    reads.answer(parts, Request(1, ListNodes(), max_staleness=0.5))  # type: ignore[arg-type]
    task = parts.answering
    assert task is not None
    await asyncio.sleep(0)  # (it waits now)
    reads.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert parts.said == []
    assert parts.answering is None
    assert not reads.tasks
