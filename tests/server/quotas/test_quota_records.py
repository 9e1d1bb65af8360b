"""The journal keeps who sent the commands that make what a token owns.

A replay (a restart, or a cluster's standby reading the leader's log) gives every
session and node the owner it had, and is never refused by a quota or the budget:
what was logged was let in.
"""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from tenure._core import CreateNode, CreateSemaphore, CreateSession, Engine
from tenure._core.quotas import COUNTED, TRACKED, Quota
from tenure._core.session import KEY_DIGEST_BYTES
from tenure._protocol.payloads import decode_command, encode_command
from tenure._protocol.wire import WireError
from tenure.server._durability.records import apply_record, command_record

KEY = b"k"


def _replayed(records: list[bytes], engine: Engine | None = None) -> Engine:
    engine = engine if engine is not None else Engine()
    for index, record in enumerate(records):
        apply_record(engine, record, f"record {index}", "test")
    return engine


def test_the_owner_is_logged_with_what_it_makes_and_replayed() -> None:
    records = [
        command_record(CreateNode("n"), 1.0, "admin"),
        command_record(CreateSession("n", KEY), 2.0, "batch"),
        command_record(CreateSemaphore(1, "s", 1, b"12345"), 3.0, "batch"),
    ]
    assert all(record is not None for record in records)
    logged = [r for r in records if r is not None]
    # Only the commands that make what their sender owns carry it: a session's own
    # commands are its owner's already (the record stays as it was).
    assert msgspec.msgpack.decode(logged[1])[3] == "batch"
    assert len(msgspec.msgpack.decode(logged[2])) == 3
    engine = _replayed(logged)
    usage = dict(zip(TRACKED, engine.ledger.of("batch").counts, strict=True))
    assert usage == {
        "sessions": 1,
        "watches": 0,
        "waiters": 0,
        "semaphores": 1,
        "nodes": 0,
        "data_bytes": KEY_DIGEST_BYTES + len("s") + 5,  # (its key's digest, a name, data)
        "prefix_watches": 0,
        "holds": 0,
        "missed_bytes": 0,
    }
    assert engine.ledger.of("admin").counts[COUNTED.index("nodes")] == 1
    assert engine.actor == ""  # (known while a record is applied only)


def test_a_replay_is_never_refused_by_a_quota_or_the_budget() -> None:
    engine = Engine()
    engine.ledger.quotas = {"batch": Quota(sessions=1, nodes=0)}
    engine.ledger.budget = 1
    records = [
        command_record(CreateNode("n"), 1.0, "batch"),
        command_record(CreateSession("n", KEY), 2.0, "batch"),
        command_record(CreateSession("n", KEY), 3.0, "batch"),
    ]
    _replayed([r for r in records if r is not None], engine)
    assert engine.ledger.of("batch").counts[0] == 2
    assert engine.ledger.enforcing  # (lifted while each record is applied only)
    assert engine.ledger.refusals == {}


def test_records_without_an_owner_still_replay_as_nobodys() -> None:
    """The records of an older server (``[1, now, command]``) read as before."""
    records = [command_record(CreateNode("n"), 1.0), command_record(CreateSession("n", KEY), 2.0)]
    engine = _replayed([r for r in records if r is not None])
    assert engine.ledger.of("").counts[0] == 1
    assert set(engine.ledger.usage) == {""}


def test_a_client_cannot_name_an_owner() -> None:
    """No command carries an owner: a CreateSession with one more field (an owner a
    client would like counted against another token) is not a command at all, and
    what a token makes is owned by the token its connection authenticated (the host
    sets ``engine.actor``; the served tests check the counts land there)."""
    layout = msgspec.msgpack.decode(encode_command(CreateSession("n", KEY)))
    forged = msgspec.msgpack.encode([*layout, "admin"])
    with pytest.raises(WireError):
        decode_command(forged)
    assert "owner" not in {f.name for f in dataclasses.fields(CreateSession)}
    assert "owner" not in {f.name for f in dataclasses.fields(CreateNode)}
