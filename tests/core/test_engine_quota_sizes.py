"""What a client chooses the size of counts: names, identities, keys (issue 47).

The memory budget's estimate is a cost per object plus every byte counted in
``data_bytes`` (:mod:`tenure._core.quotas`); a 1 KiB name, a session's description,
client identity and protection key, a watch's name are bytes the server keeps like
data. Each is counted when its object is made and uncounted, exactly, when it goes;
the quota and the budget refuse what would pass them by its size; and the running
counts stay what a recount of the whole state gives, after a snapshot's load too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    CancelWatch,
    CloseSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeSemaphore,
    DropNode,
    Engine,
    Release,
    WatchPrefix,
)
from tenure._core.invariants import check_invariants
from tenure._core.quotas import (
    OBJECT_BYTES,
    Q_DATA_BYTES,
    Q_HOLDS,
    Q_NODES,
    Q_SEMAPHORES,
    Q_SESSIONS,
    Q_WAITERS,
    Q_WATCHES,
    TRACKED,
    Quota,
    text_bytes,
)
from tenure._core.session import KEY_DIGEST_BYTES
from tenure._core.snapshot import dump, load
from tenure._core.values import ClientIdentity
from tenure.errors import LimitExceededError

from .support import NODE, acquire, make_engine

KIB = 1024
BUDGET = r"the server's memory budget \(\d+ bytes\) is used up"


def _fresh(text: str) -> str:
    """``text`` as a new string object (as a decoded command brings: none shared)."""
    return "".join(list(text))


def _take(sid: int, name: str) -> Acquire:
    """An acquire of a new ephemeral semaphore ``name``, held at once."""
    return Acquire(sid, name, MAX_COUNT, 1, ephemeral=True)


def _grows(engine: Engine, command: Any, by: int, now: float = 0.0) -> Any:
    """Apply ``command``: the estimate grows by exactly ``by`` (and the counts are right)."""
    before = engine.ledger.estimate()
    result = engine.apply(command, now)
    assert engine.ledger.estimate() - before == by
    check_invariants(engine)
    return result


def test_text_bytes_is_what_the_interpreter_keeps() -> None:
    """ASCII: its length. Other text: 1, 2 or 4 bytes a character by its widest, and
    its UTF-8 beside (kept once it is encoded: a reply, a push)."""
    assert text_bytes("") == 0
    assert text_bytes("jobs/build-42") == 13
    assert text_bytes("é" * 100) == 100 + 200
    assert text_bytes("中" * 100) == 200 + 300
    one_emoji = "a" * 1000 + "😀"  # (1,004 UTF-8 bytes: a name's most is 1,024)
    assert text_bytes(one_emoji) == 4 * 1001 + 1004
    assert text_bytes(one_emoji) > len(one_emoji.encode())


def test_the_estimate_counts_names_identities_and_keys_and_gives_them_back() -> None:
    engine = make_engine()
    start = engine.ledger.estimate()
    identity = ClientIdentity("h" * 60, 4242, "c" * 40)
    session = CreateSession(NODE, b"k" * 32, description="d" * 100, identity=identity)
    sid = _grows(engine, session, OBJECT_BYTES[Q_SESSIONS] + 32 + 100 + 60 + 40).session_id
    long = "s" * KIB
    _grows(engine, CreateSemaphore(sid, long, 1, b"x" * 10), OBJECT_BYTES[Q_SEMAPHORES] + KIB + 10)
    ephemeral = OBJECT_BYTES[Q_SEMAPHORES] + OBJECT_BYTES[Q_HOLDS] + 500
    _grows(engine, _take(sid, "e" * 500), ephemeral)
    watch = DescribeSemaphore(sid, "w" * 300, watch_data=True)
    watch_id = _grows(engine, watch, OBJECT_BYTES[Q_WATCHES] + 300).watch_id
    _grows(engine, WatchPrefix(sid, "p" * 200), OBJECT_BYTES[Q_WATCHES] + 200)
    wide = "é" * 100
    _grows(engine, CreateSemaphore(sid, wide, 1, b""), OBJECT_BYTES[Q_SEMAPHORES] + 300)
    _grows(engine, CreateNode("n" * 700), OBJECT_BYTES[Q_NODES] + 700)
    # Each returns exactly what it counted when it goes.
    _grows(engine, CancelWatch(sid, watch_id), -(OBJECT_BYTES[Q_WATCHES] + 300))
    _grows(engine, DeleteSemaphore(sid, wide), -(OBJECT_BYTES[Q_SEMAPHORES] + 300))
    _grows(engine, Release(sid, "e" * 500), -ephemeral)
    _grows(engine, DropNode("n" * 700), -(OBJECT_BYTES[Q_NODES] + 700))
    engine.apply(DeleteSemaphore(sid, long), 0.0)
    engine.apply(CloseSession(sid), 0.0)  # (its prefix watch with it)
    assert engine.ledger.estimate() == start
    check_invariants(engine)


def test_a_wait_keeps_the_semaphores_name_not_a_copy() -> None:
    """A queued acquire costs a waiter, not one more copy of a long name: the session's
    wait shares the semaphore's name object (a decoded command brings its own)."""
    engine = make_engine()
    holder = engine.apply(CreateSession(NODE, b"k"), 0.0).session_id
    waiter = engine.apply(CreateSession(NODE, b"k"), 0.0).session_id
    name = "m" * KIB
    acquire(engine, holder, _fresh(name), MAX_COUNT, ephemeral=True)
    before = engine.ledger.estimate()
    queued = acquire(engine, waiter, _fresh(name), MAX_COUNT, ephemeral=True, timeout=5.0)
    assert queued.status is AcquireStatus.QUEUED
    # (Besides the waiter, the statistics per name keep the name: tenure._core.name_stats.)
    stats = engine.name_stats
    assert engine.ledger.estimate() - before == OBJECT_BYTES[Q_WAITERS] + stats.bytes
    (kept,) = engine.sessions[waiter].waits
    assert kept is engine.nodes[NODE].semaphores[name].name
    entry = stats.entry(NODE, name)
    assert entry is not None
    assert entry.name is kept  # (no copy there either)
    check_invariants(engine)


def test_the_memory_budget_refuses_a_session_whose_identity_would_pass_it() -> None:
    engine = make_engine()
    room = 2000
    engine.ledger.budget = engine.ledger.estimate() + OBJECT_BYTES[Q_SESSIONS] + room
    key = b"k" * 100
    big = ClientIdentity("h" * 900, 1, "c" * 900)  # (with the key's digest: 1,832 bytes)
    description = "d" * (room - 1800 - KEY_DIGEST_BYTES + 1)
    with pytest.raises(LimitExceededError, match=BUDGET):
        engine.apply(CreateSession(NODE, key, description=description, identity=big), 0.0)
    assert engine.ledger.refusals == {("memory_budget", ""): 1}
    assert not engine.sessions
    fits = CreateSession(NODE, key, description=description[1:], identity=big)
    engine.apply(fits, 0.0)
    assert engine.ledger.estimate() == engine.ledger.budget
    check_invariants(engine)


def test_the_memory_budget_refuses_a_semaphore_node_or_watch_whose_name_would_pass_it() -> None:
    """Asked for the object and its name together: a name one byte longer than the room
    left is refused, one that fits takes the estimate exactly to the budget."""
    engine = make_engine()
    sid = engine.apply(CreateSession(NODE, b"k"), 0.0).session_id
    room = 1000
    makers: list[tuple[int, Callable[[int], Any]]] = [
        (Q_SEMAPHORES, lambda size: CreateSemaphore(sid, "s" * size, 1, b"")),
        (Q_SEMAPHORES, lambda size: CreateSemaphore(sid, "t" * 10, 1, b"x" * (size - 10))),
        (Q_NODES, lambda size: CreateNode("n" * size)),
        (Q_WATCHES, lambda size: DescribeSemaphore(sid, "w" * size, watch_data=True)),
        (Q_WATCHES, lambda size: WatchPrefix(sid, "p" * size)),
    ]
    for refused, (index, make) in enumerate(makers, 1):
        engine.ledger.budget = engine.ledger.estimate() + OBJECT_BYTES[index] + room
        with pytest.raises(LimitExceededError, match=BUDGET):
            engine.apply(make(room + 1), 0.0)
        assert engine.ledger.refusals == {("memory_budget", ""): refused}
        engine.apply(make(room), 0.0)
        assert engine.ledger.estimate() == engine.ledger.budget
        check_invariants(engine)


def test_the_data_bytes_quota_counts_names_a_token_chooses() -> None:
    """The hole: 1 KiB names on empty semaphores passed a data_bytes quota unseen."""
    engine = make_engine()
    engine.ledger.quotas = {"batch": Quota(data_bytes=10 * KIB)}
    engine.actor = "batch"
    try:
        sid = engine.apply(CreateSession(NODE, b"k"), 0.0).session_id
    finally:
        engine.actor = ""
    made = 0

    def fill() -> None:
        nonlocal made
        for i in range(100):
            engine.apply(CreateSemaphore(sid, f"{i:04d}" + "s" * (KIB - 4), 1, b""), 0.0)
            made += 1

    with pytest.raises(LimitExceededError, match="token 'batch' is over its quota data_bytes"):
        fill()
    assert made == 9  # (its key's digest, and 9 names of 1 KiB: a 10th passes 10 KiB)
    with pytest.raises(LimitExceededError, match="over its quota data_bytes"):
        engine.apply(WatchPrefix(sid, "p" * KIB), 0.0)
    engine.apply(WatchPrefix(sid, "p" * (KIB - KEY_DIGEST_BYTES - 9)), 0.0)  # (all but 9)
    assert engine.ledger.of("batch").counts[Q_DATA_BYTES] == 10 * KIB - 9
    # Another token, and nobody's, are not affected.
    other = engine.apply(CreateSession(NODE, b"k"), 0.0).session_id
    engine.apply(CreateSemaphore(other, "o" * KIB, 1, b""), 0.0)
    check_invariants(engine)


def test_a_snapshot_counts_names_identities_and_keys_the_same() -> None:
    engine = make_engine()
    engine.ledger.quotas = {"batch": Quota(data_bytes=100 * KIB)}
    engine.actor = "batch"
    try:
        identity = ClientIdentity("host-" + "h" * 50, 77, "client")
        sid = engine.apply(
            CreateSession(NODE, b"k" * 16, description="é" * 10, identity=identity), 0.0
        ).session_id
        engine.apply(CreateSession(NODE, b"k" * 16, identity=identity), 0.0)  # (shared on load)
        engine.apply(CreateNode("mine-" + "n" * 100), 0.0)
    finally:
        engine.actor = ""
    engine.apply(CreateSemaphore(sid, "s" * KIB, 1, b"data"), 0.0)
    acquire(engine, sid, "e" * 300, MAX_COUNT, ephemeral=True, data=b"d" * 5)
    plain = msgspec.msgpack.decode(msgspec.msgpack.encode(dump(engine)))
    loaded = load(plain)
    check_invariants(loaded)  # (the running counts are a recount of the state)
    assert loaded.ledger.of("batch").counts == engine.ledger.of("batch").counts
    assert loaded.ledger.estimate() == engine.ledger.estimate()
    # Everything goes: nothing is left counted against anybody.
    loaded.apply(DeleteSemaphore(sid, "s" * KIB), 0.0)
    for session_id in list(loaded.sessions):
        loaded.apply(CloseSession(session_id), 0.0)
    loaded.apply(DropNode("mine-" + "n" * 100), 0.0)
    assert loaded.ledger.of("batch").counts == [0] * len(TRACKED)
    assert loaded.ledger.total.counts[Q_DATA_BYTES] == len(NODE)  # (nobody's node's name)
    check_invariants(loaded)
