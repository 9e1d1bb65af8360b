"""Watches on one semaphore name, bounded per quota owner (issue 47, round two).

Every watch on a name fires on each change of it, in the step of whoever changes it:
a read-only token's 10,000 repeating watches on an honest client's register made
each of its changes cost 10,000 firings. ``max_watches_per_semaphore`` bounds the
watches one owner (token) has armed on one name; counted per owner, another
token's watches never use up a token's own room on the name.
"""

from __future__ import annotations

from typing import Any

import pytest

from tenure._core import (
    CancelWatch,
    CloseSession,
    CreateSession,
    DescribeSemaphore,
    Engine,
    UpdateSemaphore,
    WatchPrefix,
)
from tenure._core.invariants import check_invariants
from tenure._core.values import MAX_WATCHES_PER_SEMAPHORE
from tenure.errors import LimitExceededError

from .support import KEY, NODE, create_semaphore, fired, make_engine, settled, snapshot


def _as(engine: Engine, actor: str, command: Any) -> Any:
    """Apply ``command`` sent by ``actor`` (as a server's host does)."""
    engine.actor = actor
    try:
        return engine.apply(command, 0.0)
    finally:
        engine.actor = ""


def _session(engine: Engine, actor: str) -> int:
    session_id: int = _as(engine, actor, CreateSession(NODE, KEY)).session_id
    return session_id


def _watch(engine: Engine, actor: str, session_id: int, name: str, *, repeat: bool = True) -> int:
    asked = DescribeSemaphore(session_id, name, watch_data=True, watch_repeat=repeat)
    watch_id: int = _as(engine, actor, asked).watch_id
    return watch_id


def _firings(engine: Engine) -> int:
    return len(fired(settled(engine)))


def test_the_default_is_the_engine_s_named_limit() -> None:
    assert Engine().max_watches_per_semaphore == MAX_WATCHES_PER_SEMAPHORE == 1_000


def test_one_owner_s_watches_on_a_name_are_bounded_and_its_change_fires_no_more() -> None:
    engine = make_engine()
    engine.max_watches_per_semaphore = 3
    honest = _session(engine, "honest")
    create_semaphore(engine, honest, "config", 1, data=b"v0")
    readers = [_session(engine, "reader") for _ in range(2)]
    armed = [
        _watch(engine, "reader", readers[0], "config"),
        _watch(engine, "reader", readers[1], "config"),
        _watch(engine, "reader", readers[1], "config", repeat=False),
    ]
    before = snapshot(engine)
    for session_id in readers:  # every session of the token: the bound is the token's
        with pytest.raises(
            LimitExceededError,
            match=r"max_watches_per_semaphore \(3\) reached on 'config' of node "
            rf"'{NODE}' for token 'reader'",
        ):
            _watch(engine, "reader", session_id, "config")
    assert snapshot(engine) == before
    assert engine.ledger.refusals == {("max_watches_per_semaphore", "reader"): 2}
    assert engine.watches.target_count(NODE, "config", "reader") == 3
    # Another token's room on the name is its own; the reader's on another name too;
    # a prefix watch is bounded by its own rules, not this one.
    mine = [_watch(engine, "honest", honest, "config") for _ in range(3)]
    _watch(engine, "reader", readers[0], "other")
    _as(engine, "reader", WatchPrefix(readers[0], "conf", watch_data=True))
    check_invariants(engine)
    settled(engine)
    # The honest change fires the reader's 3, its own 3 and the prefix watch: no more.
    engine.apply(UpdateSemaphore(honest, "config", b"v1"), 0.0)
    assert _firings(engine) == 7
    # The one-shot firing, a cancel and a session's end each give the reader room back.
    assert engine.watches.target_count(NODE, "config", "reader") == 2
    _watch(engine, "reader", readers[0], "config")
    assert engine.apply(CancelWatch(readers[0], armed[0]), 0.0)
    _watch(engine, "reader", readers[1], "config")
    engine.apply(CloseSession(readers[1]), 0.0)
    assert engine.watches.target_count(NODE, "config", "reader") == 1
    assert engine.watches.target_count(NODE, "config", "honest") == len(mine)
    check_invariants(engine)


def test_without_an_owner_every_session_shares_the_bound() -> None:
    """No auth file: every session's owner is ``""``, and the bound is the name's."""
    engine = make_engine()
    engine.max_watches_per_semaphore = 2
    first, second = _session(engine, ""), _session(engine, "")
    _watch(engine, "", first, "x")
    _watch(engine, "", second, "x")
    with pytest.raises(LimitExceededError, match=rf"reached on 'x' of node '{NODE}'$"):
        _watch(engine, "", second, "x")
    assert engine.ledger.refusals == {("max_watches_per_semaphore", ""): 1}
    check_invariants(engine)
