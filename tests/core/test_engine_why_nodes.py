"""Who blocks whom across sessions and nodes (tenure._core.blocking): one task of a
client process holding through its session of one node and waiting through its
session of another; what links (attached sessions of one process, one task) and what
does not; and what a reader who may not read a node is shown of it (hidden)."""

from __future__ import annotations

from tenure._core import MAX_COUNT, Engine, WhyName
from tenure._core.commands import CloseSession, CreateNode, CreateSession, DetachSession
from tenure._core.invariants import check_invariants
from tenure._core.snapshot import dump, load
from tenure._core.values import NO_IDENTITY, ClientIdentity, NodeConfig
from tenure._core.why_report import WhyLink, WhyReport, WhyWait, hidden

from .support import KEY, acquire

#: The process whose one task holds on node a and waits on node b.
WORKER = ClientIdentity("host-a", 42, "worker")
#: Another process, on node b: B's holder.
OTHER = ClientIdentity("host-b", 7, "other")


def session(engine: Engine, node: str, identity: ClientIdentity, description: str = "") -> int:
    command = CreateSession(node, KEY, description=description, identity=identity)
    return int(engine.apply(command, 0.0).session_id)


def lock(engine: Engine, sid: int, name: str, task: int, now: float) -> None:
    acquire(engine, sid, name, MAX_COUNT, ephemeral=True, task=task, now=now)


def why(engine: Engine, node: str, name: str) -> WhyReport:
    return engine.apply(WhyName(node, name), 10.0)


def across() -> tuple[Engine, dict[str, int]]:
    """Task 5 of WORKER holds A of node a (session ``held``) and waits on B of node b
    (session ``waiting``), which OTHER holds (session ``root``) and waits for nothing."""
    engine = Engine()
    for node in ("a", "b"):
        engine.apply(CreateNode(node, NodeConfig()), 0.0)
    sids = {
        "held": session(engine, "a", WORKER, "worker on a"),
        "waiting": session(engine, "b", WORKER, "worker on b"),
        "root": session(engine, "b", OTHER, "other"),
    }
    lock(engine, sids["held"], "A", 5, 1.0)
    lock(engine, sids["root"], "B", 3, 2.0)
    lock(engine, sids["waiting"], "B", 5, 3.0)  # queued behind OTHER
    return engine, sids


def test_a_task_holding_on_one_node_and_waiting_on_another_is_one_chain() -> None:
    engine, sids = across()
    report = why(engine, "a", "A")
    (holder,) = report.holders
    assert holder.waiting_for == (WhyWait("b", "B", 1),)
    assert report.chain == (
        WhyLink("a", "A", sids["held"], (), (WhyWait("b", "B", 1),)),
        WhyLink("b", "B", sids["root"], (), ()),
    )
    assert report.roots is not None
    (root,) = report.roots
    assert (root.node, root.name, root.session_id, root.description) == (
        "b",
        "B",
        sids["root"],
        "other",
    )
    assert root.held_for == 8.0
    check_invariants(engine)


def test_a_wait_through_another_session_of_the_same_node_links_too() -> None:
    engine, sids = across()
    same = session(engine, "a", WORKER)
    blocker = session(engine, "a", OTHER)
    lock(engine, blocker, "C", 1, 4.0)
    lock(engine, same, "C", 5, 5.0)  # task 5 again, through a second session of node a
    report = why(engine, "a", "A")
    assert report.chain is not None
    assert report.chain[0] == WhyLink("a", "A", sids["held"], ("C",), (WhyWait("b", "B", 1),))
    assert {(root.node, root.name) for root in report.roots or ()} == {("a", "C"), ("b", "B")}


def test_another_task_another_process_or_no_process_id_links_nothing() -> None:
    for identity, task in ((WORKER, 6), (ClientIdentity("host-a", 43, "worker"), 5),
                           (NO_IDENTITY, 5)):  # fmt: skip
        engine = Engine()
        for node in ("a", "b"):
            engine.apply(CreateNode(node, NodeConfig()), 0.0)
        held = session(engine, "a", WORKER if identity is not NO_IDENTITY else NO_IDENTITY)
        waiting = session(engine, "b", identity)
        root = session(engine, "b", OTHER)
        lock(engine, held, "A", 5, 1.0)
        lock(engine, root, "B", 3, 2.0)
        lock(engine, waiting, "B", task, 3.0)
        report = why(engine, "a", "A")
        assert report.holders[0].waiting_for == (), identity
        assert [(r.node, r.session_id) for r in report.roots or ()] == [("a", held)]


def test_a_detached_session_links_nothing() -> None:
    # Its client is gone: the session may be resumed by another process, or the
    # process id taken by a new one (task numbers are per process).
    engine, sids = across()
    engine.apply(DetachSession(sids["waiting"]), 4.0)
    report = why(engine, "a", "A")
    assert report.holders[0].waiting_for == ()
    engine, sids = across()
    engine.apply(DetachSession(sids["held"]), 4.0)
    assert why(engine, "a", "A").holders[0].waiting_for == ()


def test_the_sessions_of_a_process_are_kept_as_sessions_come_and_go() -> None:
    engine, sids = across()
    assert list(engine.sessions_of(WORKER)) == [sids["held"], sids["waiting"]]
    assert engine.client_sessions[OTHER] == sids["root"]  # (one: an int, no table)
    assert list(engine.sessions_of(NO_IDENTITY)) == []
    copy = load(dump(engine))
    assert copy.client_sessions == engine.client_sessions  # (the same order too)
    assert list(copy.sessions_of(WORKER)) == list(engine.sessions_of(WORKER))
    assert why(copy, "a", "A").chain == why(engine, "a", "A").chain
    engine.apply(CloseSession(sids["root"]), 5.0)
    engine.apply(CloseSession(sids["waiting"]), 5.0)
    assert engine.client_sessions == {WORKER: sids["held"]}  # (one: an int, no table)
    check_invariants(engine)


def test_what_lies_in_a_node_the_reader_may_not_read_is_hidden() -> None:
    engine, sids = across()
    report = why(engine, "a", "A")
    shown = hidden(report, lambda node: node == "a")
    (holder,) = shown.holders
    assert holder.waiting_for == (WhyWait("", "", 1),)
    assert shown.chain == (
        WhyLink("a", "A", sids["held"], (), (WhyWait("", "", 1),)),
        WhyLink("", "", 0, (), ()),
    )
    assert shown.roots is not None
    (root,) = shown.roots
    assert (root.node, root.name, root.session_id, root.description) == ("", "", 0, "")
    assert (root.identity, root.held_for) == (NO_IDENTITY, 8.0)
    assert "B" not in repr(shown)
    assert "other" not in repr(shown)
    assert "host-b" not in repr(shown)
    assert hidden(report, lambda node: True) == report


def test_the_sessions_of_a_process_are_looks_spent_from_the_limit() -> None:
    # A process of hundreds of sessions: each one looked at is a look, so a why stops
    # at its limit, however many the process has (and reads them in the order they
    # were made, never all of them sorted).
    engine, _ = across()
    for _ in range(300):
        session(engine, "b", WORKER)
    assert why(engine, "a", "A").holders[0].waiting_for == (WhyWait("b", "B", 1),)
    engine.why_look_limit = 50
    report = why(engine, "a", "A")
    assert report.cut
    assert report.chain is not None
    assert len(report.chain) <= 1
