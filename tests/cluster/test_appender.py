"""The leader's appender against a scripted store (unit tier): group commit, the
snapshot barrier, the fence, etcd out of reach, and the leader's bound on what waits."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from tenure._core import CreateNode, Engine, NodeConfig
from tenure.errors import NotLeaderError, UnavailableError
from tenure.server._cluster.appender import Appender
from tenure.server._cluster.hosts import leader_host
from tenure.server._cluster.journal import ClusterJournal
from tenure.server._cluster.keys import LogEntry, ServerRecord
from tenure.server._cluster.role import ClusterRole
from tenure.server._cluster.store import Appended, ClusterStore
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.storage import framed


class ScriptedStore:
    """Appends wait until the test lets them through (:meth:`let`), or answer at once."""

    def __init__(self, *, hold: bool = True) -> None:
        self.entries: dict[int, LogEntry] = {}
        self.hold = hold
        self.gates: list[asyncio.Future[Appended | BaseException]] = []
        self.answer: Appended | BaseException = Appended.DONE

    async def append(self, index: int, entry: LogEntry, lease: int) -> Appended:
        if self.hold:
            gate: asyncio.Future[Appended | BaseException] = (
                asyncio.get_running_loop().create_future()
            )
            self.gates.append(gate)
            outcome = await gate
        else:
            outcome = self.answer
        if isinstance(outcome, BaseException):
            raise outcome
        if outcome is Appended.DONE:
            self.entries[index] = entry
        return outcome

    def let(self, outcome: Appended | BaseException = Appended.DONE) -> None:
        self.gates.pop(0).set_result(outcome)


def _unexpected(what: str, error: BaseException) -> None:
    raise AssertionError(f"the appender failed {what}: {error!r}")


def _appender(store: ScriptedStore, deadline: float = 1e12, max_pending: int = 10**9) -> Appender:
    return Appender(
        cast(ClusterStore, store),
        lease=1,
        term=7,
        next_index=5,
        max_entry=10_000,
        deadline=lambda: deadline,
        max_pending=max_pending,
    )


async def _turns(count: int = 5) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def test_batches_handed_over_during_an_append_go_together_in_the_next() -> None:
    store = ScriptedStore()
    appender = _appender(store)
    durable: list[int] = []
    appender.start(lambda batch, seconds: durable.append(batch), _unexpected)
    assert appender.submit(framed(b"one")) == 1
    await _turns()
    assert appender.submit(framed(b"two")) == 2
    assert appender.submit(framed(b"three")) == 3
    assert appender.pending == 3 * (8 + 3) + 2  # three records, two of them waiting
    store.let()
    await _turns()
    assert durable == [1]
    store.let()
    await appender.idle()
    assert durable == [1, 3]  # one append for batches 2 and 3
    assert sorted(store.entries) == [5, 6]
    assert store.entries[6].records == framed(b"two") + framed(b"three")
    assert store.entries[6].term == 7
    assert appender.pending == 0
    assert appender.last_index == 6


async def test_a_refused_fence_fails_the_appender_and_it_takes_nothing_more() -> None:
    store = ScriptedStore()
    appender = _appender(store)
    failed: list[BaseException] = []
    appender.start(
        lambda batch, seconds: pytest.fail("nothing is durable"),
        lambda what, error: failed.append(error),
    )
    appender.submit(framed(b"x"))
    await _turns()
    store.let(Appended.DEPOSED)
    await _turns()
    assert len(failed) == 1
    assert isinstance(failed[0], NotLeaderError)
    assert "election key is gone" in str(failed[0])
    with pytest.raises(NotLeaderError):
        appender.submit(framed(b"y"))


async def test_etcd_out_of_reach_is_tried_again_until_the_lease_could_end() -> None:
    store = ScriptedStore(hold=False)
    store.answer = UnavailableError("etcd unreachable")
    loop = asyncio.get_running_loop()
    appender = _appender(store, deadline=loop.time() + 0.3)
    failed: asyncio.Future[BaseException] = loop.create_future()
    appender.start(lambda batch, seconds: None, lambda what, error: failed.set_result(error))
    appender.submit(framed(b"x"))
    error = await asyncio.wait_for(failed, 5)
    assert isinstance(error, UnavailableError)
    assert "before this leader's lease could end" in str(error)


async def test_the_leader_refuses_commands_while_too_much_waits_for_etcd(tmp_path: Path) -> None:
    store = ScriptedStore()
    appender = _appender(store, max_pending=10)
    journal = ClusterJournal(cast(ClusterStore, store), appender, snapshot_every=10, cluster="")
    output: Any = type("Out", (), {"seal": lambda *a: None, "release": lambda *a: None})()
    role = ClusterRole("c", ServerRecord("m", "127.0.0.1:1"))
    role.lead(7)
    served = leader_host(ServeConfig(data_dir=tmp_path), journal, Engine(), role)
    served.attach(lambda effects: None, output, lambda: None)
    served.start()
    host = served.host
    host.execute(CreateNode("a", NodeConfig()))
    served.flush()  # handed to the appender, which waits for etcd
    assert appender.pending > 10
    with pytest.raises(UnavailableError, match="behind"):
        host.execute(CreateNode("b", NodeConfig()))
    await _turns()  # the appender's task takes the batch to etcd
    store.let()
    await appender.idle()
    assert appender.pending == 0
    host.execute(CreateNode("b", NodeConfig()))
    served.abandon()
