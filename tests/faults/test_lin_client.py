"""The ``linearizable`` scenario's client records what it knows, no more.

A tenure client's ``release()`` (a lock's) and ``leave()`` (a member's) return once
the server applied them, or once the session ended: a session the client gave up on
its own clock (no answer for its recovery window, docs/guarantees.md 6a). In the second
case the server may still keep the hold until it expires the session, later (a cluster
whose leader was cut from etcd keeps it a window past the next leader's takeover), so
the end is ``info`` (it takes effect some time after, unobserved), never ``ok`` at the
moment the call returned. An ``ok`` there made a later ``members()`` read that still
showed the member a false violation of ``linearizable:membership`` (ci16).

A real ``tenure serve`` is stopped (SIGSTOP) while the client leaves, or before it
releases (at its pause hook, between the hold and the release), and let go on once the
call returned; every wait is bounded, nothing is timed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import tenure
from tenure.testing import lincheck
from tenure.testing.workload import (
    Books,
    LinClient,
    LinConfig,
    Pauses,
    _hold_steps,
    close_holds,
    model_file,
)
from tests.server.wire import ServerProcess
from tools.faults.history import Recorder, now_ns
from tools.faults.lin_client import LoopPauses

pytestmark = pytest.mark.timeout(120)

NODE = "n"
#: The sessions' recovery window: the client gives its session up this long after the
#: server last answered.
WINDOW = 2.0


class StopAtPause(LoopPauses):
    """The worker's pause hook, run between a hold and its release: stops the server."""

    def __init__(self, config: LinConfig, recorder: Recorder, server: ServerProcess) -> None:
        super().__init__(config, recorder)
        self.server = server

    async def maybe(self, rng: random.Random, holder: str) -> None:
        self.server.proc.send_signal(signal.SIGSTOP)


def _config(tmp_path: Path, url: str) -> LinConfig:
    return LinConfig(
        index=0, doors=[url], node=NODE, clients=1, out_dir=str(tmp_path),
        history=str(tmp_path / "history.jsonl"), seed=1, registers=[], counters=[],
        mutexes=["mtx-0"], groups=["grp-0"], member_ids=["id-0"], window=WINDOW,
        hold=(0.0, 0.0),
    )  # fmt: skip


def _events(tmp_path: Path, model: str) -> list[dict[str, Any]]:
    lines = model_file(tmp_path, 0, model).read_text().splitlines()
    return [event for event in map(json.loads, lines) if "type" in event]


def _ends(events: list[dict[str, Any]], f: str) -> list[str]:
    """The outcomes recorded for ``f`` (its invocations left out)."""
    return [e["type"] for e in events if e["f"] == f and e["type"] != "invoke"]


@asynccontextmanager
async def _client_on_a_server(
    tmp_path: Path, pauses: Callable[[LinConfig, Recorder, ServerProcess], Pauses] | None = None
) -> AsyncIterator[tuple[LinClient, tenure.Session, ServerProcess]]:
    """A real server, its node, and one workload client with a session of :data:`WINDOW`
    (``pauses``: the worker's pause hook, a blocking one by default); the client's files
    are closed when the block ends, the server stopped."""
    with ServerProcess(tmp_path / "data", "--idle-timeout", "0") as server:
        config = _config(tmp_path, f"tenure://127.0.0.1:{server.port}")
        recorder = Recorder(tmp_path / "history.jsonl")
        books = Books(tmp_path, 0, now_ns)
        hook = LoopPauses(config, recorder) if pauses is None else pauses(config, recorder, server)
        lin = LinClient(config, 0, books, hook, recorder)
        try:
            async with tenure.connect(config.doors[0]) as client:
                await client.create_node(NODE)
                session = await client.session(NODE, recovery_window=WINDOW)
                yield lin, session, server
        finally:
            books.close()
            recorder.close()


async def test_a_leave_answered_by_the_session_given_up_is_info(tmp_path: Path) -> None:
    async with _client_on_a_server(tmp_path) as (lin, session, server):
        await lin.join_or_leave(session)  # joins id-0
        assert "grp-0" in lin.members
        server.proc.send_signal(signal.SIGSTOP)
        try:
            await lin.join_or_leave(session)  # leaves: answered by the session's end
            assert session.lost_reason is not None
        finally:
            server.proc.send_signal(signal.SIGCONT)
    assert _ends(_events(tmp_path, "membership"), "join") == ["ok"]
    assert _ends(_events(tmp_path, "membership"), "leave") == ["info"]


async def test_a_leave_the_server_answered_is_ok(tmp_path: Path) -> None:
    async with _client_on_a_server(tmp_path) as (lin, session, _):
        await lin.join_or_leave(session)
        await lin.join_or_leave(session)
        assert session.lost_reason is None
    assert _ends(_events(tmp_path, "membership"), "leave") == ["ok"]


class StopUntilGivenUp(StopAtPause):
    """Stops the server at the pause hook, then waits until the client gives its session
    up on its own clock (the test sets :attr:`session`): the release comes after."""

    session: tenure.Session | None = None

    async def maybe(self, rng: random.Random, holder: str) -> None:
        await super().maybe(rng, holder)
        assert self.session is not None
        async with asyncio.timeout(30 * WINDOW):  # (bounded; the window is 2 s)
            await self.session.lost


@pytest.mark.parametrize(
    "stop",
    [StopAtPause, StopUntilGivenUp],
    ids=["the-release-answered-by-the-sessions-end", "the-release-after-the-client-gave-up"],
)
async def test_a_release_of_a_session_given_up_is_info(
    tmp_path: Path, stop: type[StopAtPause]
) -> None:
    # The server is stopped between the hold and the release: the release returns once
    # the client gives its session up, or comes after that. Either way the server may
    # keep the hold a while yet (a read of the holders may show it): the release is no
    # proof that nothing was held (a `fail`), nor that it was applied (`ok`).
    async with _client_on_a_server(tmp_path, stop) as (lin, session, server):
        if isinstance(lin.pauses, StopUntilGivenUp):
            lin.pauses.session = session
        try:
            await lin.hold_mutex(session)
            assert session.lost_reason is not None
        finally:
            server.proc.send_signal(signal.SIGCONT)
    events = _events(tmp_path, "mutex")
    assert _ends(events, "acquire") == ["ok"]
    assert _ends(events, "release") == ["info"]


# -- hand-off ----------------------------------------------------------------------------


def _mutex_verdict(events: list[dict[str, Any]]) -> lincheck.CheckResult:
    """lincheck's ``mutex`` model over ``events`` (a worker's mutex file), closed as the
    fault suite and the simulation close it."""
    closed = close_holds("mutex", events)
    return lincheck.check(lincheck.from_events(enumerate(closed, start=1), "mutex"), "mutex")


@asynccontextmanager
async def _two_clients_on_a_server(
    tmp_path: Path,
) -> AsyncIterator[tuple[list[LinClient], list[tenure.Session], Books]]:
    """A real server, its node, and two workload clients of one worker (their books, and
    so their offers, shared), each with a session of its own."""
    with ServerProcess(tmp_path / "data", "--idle-timeout", "0") as server:
        config = dataclasses.replace(
            _config(tmp_path, f"tenure://127.0.0.1:{server.port}"), clients=2
        )
        recorder = Recorder(tmp_path / "history.jsonl")
        books = Books(tmp_path, 0, now_ns)
        hook = LoopPauses(config, recorder)
        lins = [LinClient(config, n, books, hook, recorder) for n in range(2)]
        try:
            async with tenure.connect(config.doors[0]) as client:
                await client.create_node(NODE)
                sessions = [await client.session(NODE, recovery_window=WINDOW) for _ in lins]
                yield lins, sessions, books
        finally:
            books.close()
            recorder.close()


async def test_a_hold_handed_off_is_adopted_under_a_greater_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (the offer waits for the adopter as long as the test does: a busy machine may take
    # longer than the workload's OFFER_WAIT to adopt; an adoption ends the wait at once)
    monkeypatch.setattr(_hold_steps, "OFFER_WAIT", 30.0)
    async with _two_clients_on_a_server(tmp_path) as ([offering, adopting], sessions, books):
        books.offers = offers = _Offers()

        async def adopt_once_offered() -> None:
            async with asyncio.timeout(30.0):
                await offers.offered.wait()
            await adopting.adopt_mutex(sessions[1])

        await asyncio.gather(offering.hand_off_mutex(sessions[0]), adopt_once_offered())
    events = _events(tmp_path, "mutex")
    grants = [
        (e["process"], e["value"]) for e in events if e["type"] == "ok" and e["f"] == "acquire"
    ]
    assert [process for process, _ in grants] == ["w0c0", "w0c1"], events
    (_, offered), (_, adopted) = grants
    assert adopted > offered  # the adopter's token: a new one, greater
    # The adoption ended the offered hold: its lease told lost (here at once, the
    # server's push), its release a fail; or, untold, the release info and the hold's
    # end a lost from the offer on, never completed. That end is recorded at the offer
    # (the client might be killed before its release is answered), and stands once the
    # history is closed only if the release was not answered ok or fail.
    released = _ends([e for e in events if e["process"] == "w0c0"], "release")
    assert released in (["fail"], ["info"]), events
    untold = f"w0c0/untold-mtx-0-{offered}"
    assert [e["type"] for e in events if e["process"] == untold] == ["invoke"], events
    closed = close_holds("mutex", events)
    assert any(e["process"] == untold for e in closed) == (released == ["info"]), closed
    assert _mutex_verdict(events).ok


async def test_an_adoption_of_a_hold_released_first_fails(tmp_path: Path) -> None:
    async with _two_clients_on_a_server(tmp_path) as ([offering, adopting], sessions, books):
        books.offers = offers = _Offers()
        await offering.hand_off_mutex(sessions[0])  # nobody adopts: it is released
        assert offers.taken
        assert not offers  # (withdrawn)
        books.offers = list(offers.taken)  # (the offer withdrawn, adopted all the same)
        await adopting.adopt_mutex(sessions[1])
    events = _events(tmp_path, "mutex")
    adopter = [e for e in events if e["process"].startswith("w0c1")]
    assert _ends(adopter, "acquire") == ["fail"]
    assert _mutex_verdict(events).ok


class _Offers(list[tuple[str, str]]):
    """A worker's offers that also keeps each one made (``taken``), and says when one
    was made (``offered``)."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[tuple[str, str]] = []
        self.offered = asyncio.Event()

    def append(self, offer: tuple[str, str]) -> None:
        self.taken.append(offer)
        super().append(offer)
        self.offered.set()
