"""The YDB visits' recording (tools/faults/lin_ydb.py) against a face in memory, checked.

:class:`FakeFace` answers a visit's calls as tenure's YDB face and YDB's SDK do together:
each grant with the next fencing token, an owner listed with it; a session that expired
answers nothing more (the SDK tries to re-attach it for ever: its calls time out). Its
planted fault, ``hide_expiry``, answers an expired session's calls as if it lived on
(a face that re-attached an expired session as a new one would): its holder's release
then looks confirmed, and lincheck's ``semaphore`` model must catch the overlap with
the hold granted after the expiry. No process is started.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tenure.testing.workload import Books, LinClient, LinConfig, ProcessIds, read_events
from tools.faults.check_lin_workload import check_workload
from tools.faults.history import Recorder, now_ns
from tools.faults.lin_client import LoopPauses
from tools.faults.lin_ydb import Visit, YdbVisits
from tools.faults.lin_ydb_sdk import Described, YdbSession

#: Seconds the first client holds what it got (the test's turn, in between).
FIRST_HOLDS = 0.3


class FakeFace:
    """Semaphores, tokens and sessions in memory (module docstring)."""

    def __init__(self, *, hide_expiry: bool = False) -> None:
        self.hide_expiry = hide_expiry
        self.token = 0
        self.last_session = 0
        self.limits = {"ydb-mtx": 1, "ydb-sem": 3}
        #: Semaphore -> session id -> (token, count).
        self.owners: dict[str, dict[int, tuple[int, int]]] = {n: {} for n in self.limits}
        self.waiters: dict[str, set[int]] = {n: set() for n in self.limits}
        self.data: dict[str, bytes] = {"reg-0": b"0"}
        self.expired: set[int] = set()
        #: Set once session 1 was granted something.
        self.granted_to_first = asyncio.Event()
        #: Acquires that wait (and time out, as the SDK's own wait does) when not granted.
        self.queue = False
        self.released: list[tuple[int, str]] = []

    def expire(self, session_id: int) -> None:
        """The session's timeout passed with no stream: it ends, and what it held."""
        self.expired.add(session_id)
        for owners in self.owners.values():
            owners.pop(session_id, None)
        for waiting in self.waiters.values():
            waiting.discard(session_id)


class FakeSession:
    """A :class:`~tools.faults.lin_ydb.YdbSession` of :class:`FakeFace`."""

    def __init__(self, face: FakeFace) -> None:
        self.face = face
        face.last_session += 1
        self.id = face.last_session

    @property
    def session_id(self) -> int | None:
        return self.id

    def _live(self) -> FakeFace:
        face = self.face
        if self.id in face.expired and not face.hide_expiry:
            raise TimeoutError  # the SDK's wait for an answer that never comes
        return face

    async def acquire(self, name: str, limit: int, count: int) -> None:
        face = self._live()
        held = sum(c for _, c in face.owners[name].values())
        if held + count <= face.limits[name]:
            face.token += 1
            face.owners[name][self.id] = (face.token, count)
            if self.id == 1:
                face.granted_to_first.set()
        elif face.queue:
            face.waiters[name].add(self.id)
            raise TimeoutError  # queued past the SDK's wait

    async def release(self, name: str) -> None:
        face = self._live()
        face.owners[name].pop(self.id, None)
        face.waiters[name].discard(self.id)
        face.released.append((self.id, name))

    async def describe(self, name: str) -> Described:
        face = self._live()
        if name in face.data:
            return Described(True, face.data[name], {})
        owners = {sid: token for sid, (token, _) in face.owners[name].items()}
        return Described(True, b"", owners, frozenset(face.waiters[name]))

    async def update(self, name: str, data: bytes) -> None:
        self._live().data[name] = data

    async def close(self) -> None:
        return None


class Clients:
    """Two clients of one worker (their books in ``tmp_path``) visiting a
    :class:`FakeFace`; the first holds for :data:`FIRST_HOLDS` seconds, the other not at
    all."""

    def __init__(self, tmp_path: Path, face: FakeFace) -> None:
        self.lin_dir = tmp_path / "lin"
        self.lin_dir.mkdir()
        self.config = LinConfig(
            index=0, doors=["tenure://unused"], node="faults", clients=2,
            out_dir=str(self.lin_dir), history=str(tmp_path / "w0.jsonl"), seed=1,
            registers=["reg-0"], counters=[], mutexes=[], groups=[], member_ids=[],
            hold=(FIRST_HOLDS, FIRST_HOLDS), ydb="grpc://unused",
        )  # fmt: skip
        self.recorder = Recorder(tmp_path / "w0.jsonl")
        self.books = Books(self.lin_dir, 0, now_ns)

        async def connect(client: LinClient) -> YdbSession:
            return FakeSession(face)

        configs = [self.config, replace(self.config, hold=(0.0, 0.0))]
        self.visits = [YdbVisits(config, connect) for config in configs]
        self.clients = [
            LinClient(config, n, self.books, LoopPauses(config, self.recorder), self.recorder)
            for n, config in enumerate(configs)
        ]

    async def visit(self, number: int) -> Visit:
        """A visit of client ``number``, its session open."""
        client = self.clients[number]
        visit = Visit(self.visits[number], client, ProcessIds(client.label + ".y"))
        assert await visit.renew()
        return visit

    def events(self, model: str) -> list[dict[str, Any]]:
        """What the worker recorded of ``model``, in time order."""
        self.close()
        return read_events([self.lin_dir / f"w0-{model}.jsonl"])

    def rules(self) -> set[str]:
        """The rules the recorded histories break."""
        self.close()
        violations, _ = check_workload(self.lin_dir, None)
        return {v.rule for v in violations}

    def close(self) -> None:
        """Close the worker's files (idempotent)."""
        self.books.close()
        self.recorder.close()


@pytest.fixture
def clients_of(tmp_path: Path) -> Iterator[Callable[[FakeFace], Clients]]:
    """Make the clients of a :class:`FakeFace` (their files closed at the end)."""
    made: list[Clients] = []

    def make(face: FakeFace) -> Clients:
        made.append(Clients(tmp_path, face))
        return made[-1]

    yield make
    for clients in made:
        clients.close()


def _seen(events: list[dict[str, Any]]) -> list[tuple[str, str, str, Any]]:
    return [(e["process"], e["type"], e["f"], e["value"]) for e in events]


async def _expired_while_held(clients: Clients, face: FakeFace) -> None:
    """Client 0 holds ydb-mtx; its session expires while it holds (as when its loop
    stood still), and client 1 takes and releases ydb-mtx before client 0 releases."""
    holder, other = await clients.visit(0), await clients.visit(1)
    holding = asyncio.create_task(holder.hold("ydb-mtx"))
    async with asyncio.timeout(5.0):
        await face.granted_to_first.wait()
    face.expire(1)
    assert await other.hold("ydb-mtx")
    async with asyncio.timeout(5.0):
        await holding


async def test_a_session_expired_while_held_is_a_loss_heard_by_a_new_session(
    clients_of: Callable[[FakeFace], Clients],
) -> None:
    face = FakeFace()
    clients = clients_of(face)
    await _expired_while_held(clients, face)
    events = clients.events("semaphore")
    assert _seen(events) == [
        ("w0c0.y", "invoke", "acquire", 1),
        ("w0c0.y/lost-ydb-mtx-1", "invoke", "lost", 1),  # the describe that saw the grant
        ("w0c0.y", "ok", "acquire", 1),
        ("w0c1.y", "invoke", "acquire", 1),
        ("w0c1.y", "ok", "acquire", 2),
        ("w0c1.y", "invoke", "release", 2),
        ("w0c1.y", "ok", "release", 2),
        ("w0c0.y", "invoke", "release", 1),
        ("w0c0.y", "info", "release", 1),  # never answered: the session had expired
        ("w0c0.y/lost-ydb-mtx-1", "ok", "lost", 1),  # a new session no longer sees it
    ]
    assert clients.rules() == set()


async def test_a_face_that_hides_an_expiry_is_caught_by_the_semaphore_model(
    clients_of: Callable[[FakeFace], Clients],
) -> None:
    face = FakeFace(hide_expiry=True)
    clients = clients_of(face)
    await _expired_while_held(clients, face)
    # The holder's release looks confirmed (its session answers, without the hold):
    # held until then, as far as it knows, while the other was granted.
    assert ("w0c0.y", "ok", "release", 1) in _seen(clients.events("semaphore"))
    assert clients.rules() == {"linearizable:semaphore"}


async def test_an_acquire_not_granted_fails_and_one_left_waiting_stops_its_wait(
    clients_of: Callable[[FakeFace], Clients],
) -> None:
    face = FakeFace()
    clients = clients_of(face)
    face.owners["ydb-mtx"][99] = (7, 1)  # held by a session of nobody's
    face.token = 7
    first = await clients.visit(0)
    # Answered, neither owner nor waiter: the face's wait ran out. The visit goes on.
    assert await first.hold("ydb-mtx")
    face.queue = True
    # Unanswered (the SDK's wait ran out first), and left a waiter: unknown, the wait
    # stopped before the session is closed, and the visit ends.
    assert not await first.hold("ydb-mtx")
    assert face.released == [(1, "ydb-mtx")]
    assert not face.waiters["ydb-mtx"]
    assert _seen(clients.events("semaphore")) == [
        ("w0c0.y", "invoke", "acquire", 1),
        ("w0c0.y", "fail", "acquire", 1),
        ("w0c0.y", "invoke", "acquire", 1),
        ("w0c0.y", "info", "acquire", 1),
    ]


async def test_a_register_write_unanswered_is_sent_again_as_a_new_process(
    clients_of: Callable[[FakeFace], Clients],
) -> None:
    face = FakeFace()
    clients = clients_of(face)
    visit = await clients.visit(0)
    face.expire(1)
    assert await visit.write()
    assert await visit.read()
    events = clients.events("register")
    value = events[0]["value"]
    assert value < 0  # a YDB client's
    assert _seen(events) == [
        ("w0c0.y", "invoke", "write", value),
        ("w0c0.y", "info", "write", value),
        ("w0c0.y.1", "invoke", "write", value),
        ("w0c0.y.1", "ok", "write", value),
        ("w0c0.y.1", "invoke", "read", None),
        ("w0c0.y.1", "ok", "read", value),
    ]
    clients.close()
    notes = [json.loads(line) for line in clients.recorder.path.read_text().splitlines()]
    assert [n.get("call") for n in notes if n.get("kind") == "ydb-unanswered"] == ["write"]
    assert clients.rules() == set()
