"""seq-awaited, seq with every release awaited: the session's awaited form, and where
the orchestrator runs it. On memory:// and with the servers faked; nothing is timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bench.peers import run
from bench.peers.clients import NODE, LockSession, lock_client
from bench.peers.targets import TARGETS
from bench.tools import systems
from bench.tools.results import Measure

import tenure


async def test_tenures_awaited_form_takes_a_lock_and_waits_for_its_release() -> None:
    client = lock_client("tenure-memory", "memory://", 10.0)
    await client.open()
    watcher = await tenure.connect("memory://bench")
    try:
        block = await client.session()
        awaited = block.awaited()
        assert awaited is not block
        handle = await awaited.acquire("awaited-1")
        # What a user holds in this form: the Lock of `lock = await m.lock()`.
        assert isinstance(handle, tenure.Lock)
        assert handle.held
        mutex = (await watcher.session(NODE)).mutex("awaited-1")
        assert (await mutex.describe()).held
        await awaited.release(handle)
        assert not handle.held
        # Returned once applied: every client sees the mutex free at once.
        assert not (await mutex.describe()).held
        await awaited.close()  # closes the session (the block form's too)
    finally:
        await watcher.aclose()
        await client.close()


async def test_a_peers_release_waits_already_so_its_awaited_form_is_itself() -> None:
    client = lock_client("redis", "redis://127.0.0.1:1", 1.0)  # never connected
    session = await client.session()
    assert session.awaited() is session
    plain = LockSession()
    assert plain.awaited() is plain


class FakeServer:
    """What lock_workloads uses of a started server: its URL, its pids, stop()."""

    url = "tenure://127.0.0.1:1"

    def __init__(self) -> None:
        self.stopped = False

    def pids(self) -> list[int]:
        return [4242]

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The client processes' command lines lock_workloads would run (none is run)."""
    argvs: list[list[str]] = []

    def start(system: str, workdir: Path) -> FakeServer:
        return FakeServer()

    def client_run(argv: list[str], workload: str, system: str) -> list[Measure]:
        argvs.append(argv)
        return []

    monkeypatch.setattr(systems, "start", start)
    monkeypatch.setattr(run, "client_run", client_run)
    monkeypatch.setattr(run, "log", lambda message: None)
    return argvs


def _option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv else None


def test_seq_awaited_runs_in_one_shape_with_the_servers_cpu(
    planned: list[list[str]], tmp_path: Path
) -> None:
    run.lock_workloads("tenure-off", ["seq", "seq-awaited", "par"], 1, tmp_path, quick=True)
    one, each = planned
    assert (_option(one, "--workload"), _option(one, "--shape")) == ("seq,seq-awaited,par", "one")
    assert _option(one, "--server-pid") == "4242"
    sizes = dict(part.split("=") for part in str(_option(one, "--n")).split(","))
    assert sizes == {w: str(run.SIZES[w]) for w in ("seq", "seq-awaited", "par")}
    assert run.SIZES["seq-awaited"] == run.SIZES["seq"]  # the same pairs in both forms
    # A session's workload has one shape: the client-each process runs par alone.
    assert (_option(each, "--workload"), _option(each, "--shape")) == ("par", "each")
    assert _option(each, "--server-pid") is None
    planned.clear()
    run.lock_workloads("redis", ["seq-awaited"], 2, tmp_path, quick=False)  # full: its own
    assert [_option(a, "--workload") for a in planned] == ["seq-awaited", "seq-awaited"]
    assert all(_option(a, "--server-pid") == "4242" for a in planned)


def test_seq_awaited_is_not_run_where_no_target_judges_it(
    planned: list[list[str]], tmp_path: Path
) -> None:
    assert run.lock_workloads("etcd", ["seq-awaited"], 1, tmp_path, quick=True) == []
    assert planned == []  # no server started, no client process
    run.lock_workloads("tenure-postgres", ["seq", "seq-awaited"], 1, tmp_path, quick=True)
    assert [_option(a, "--workload") for a in planned] == ["seq"]


def test_every_system_a_seq_awaited_target_names_runs_it() -> None:
    named: set[Any] = set()
    for targets in TARGETS.values():
        for t in targets:
            if t.workload == "seq-awaited":
                named.update(t.systems[:1])
                if t.peer_workload in (None, "seq-awaited"):  # (else measured there)
                    named.add(t.peer)
    assert named
    assert named <= set(run.AWAITED_FORM)
    assert "seq-awaited" in run.LOCK_WORKLOADS
    assert "seq-awaited" in run.ONE_SESSION
