"""A session keeps its protection key's SHA-256 digest, never the key (issue 58, D7).

The server only ever compares keys (AttachSession, ResumeSession), so the engine keeps
the digest, computed once as the session is made, and compares it with the digest of
the key each later command presents. A snapshot (and so a data directory's snapshots
and every backup) holds the digests: whoever reads one cannot take a session back
with what it found. Snapshots of version 11 and older hold the keys themselves: they
load with each key hashed, and their sessions still open with their keys.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tenure._core import AttachSession, Engine, ResumeSession
from tenure._core.snapshot import dump, load
from tenure._core.snapshot_layout import SESSION_FIELDS, SNAPSHOT_VERSION
from tenure.errors import PermissionDeniedError, SessionExpiredError

from .support import NODE, acquire, make_engine, open_session
from .test_snapshot import dump_v1, dump_v3, dump_v4

#: Distinct keys, long enough that no digest or other bytes hold one by chance.
KEYS = (b"known-protection-key-0001", b"known-protection-key-0002")


def engine_of_keyed_sessions() -> tuple[Engine, list[int]]:
    """Two sessions, each with a key of :data:`KEYS`, the first holding ``m``."""
    engine = make_engine()
    sessions = [open_session(engine, key=key) for key in KEYS]
    acquire(engine, sessions[0], "m", ephemeral=True)
    engine.take_effects()
    return engine, sessions


def assert_opens_with_its_key_only(engine: Engine, sessions: list[int], now: float) -> None:
    """Each session is attached and resumed with its key, and refused another's."""
    for sid, key, other in zip(sessions, KEYS, reversed(KEYS), strict=True):
        with pytest.raises(PermissionDeniedError, match="wrong protection key"):
            engine.apply(AttachSession(sid, other, 10), now)
        with pytest.raises(SessionExpiredError):
            engine.apply(ResumeSession(sid, other, NODE), now)
        assert engine.apply(AttachSession(sid, key, 10), now).seq_no == 10
        assert engine.apply(ResumeSession(sid, key, NODE), now).seq_no == 11
    engine.take_effects()


def with_clear_keys(data: dict[str, Any], width: int, keys: dict[int, bytes]) -> dict[str, Any]:
    """A snapshot's plain data as an older server wrote it: each session's key, not its
    digest, in its row of ``width`` values (``keys``: each session's by id)."""
    flat = list(data["sessions"])
    for row in range(0, len(flat), width):
        flat[row + 4] = keys[flat[row]]
    return {**data, "sessions": flat}


def test_a_snapshot_holds_no_protection_key_in_clear() -> None:
    engine, sessions = engine_of_keyed_sessions()
    written = msgspec.msgpack.encode(dump(engine))
    for key in KEYS:
        assert key not in written
    restored = load(msgspec.msgpack.decode(written))
    assert_opens_with_its_key_only(restored, sessions, 1.0)


def test_a_session_counts_its_keys_digest_whatever_the_keys_length() -> None:
    engine = make_engine()
    short, long = open_session(engine, key=b"k"), open_session(engine, key=b"k" * 256)
    assert engine.sessions[short].counted_bytes() == engine.sessions[long].counted_bytes() == 32


@pytest.mark.parametrize("version", [11, 5])
def test_an_older_snapshot_of_clear_keys_loads_with_each_key_hashed(version: int) -> None:
    """A data directory (or a backup) written before version 12: its sessions open with
    their keys, and the next snapshot holds the digests."""
    engine, sessions = engine_of_keyed_sessions()
    older = with_clear_keys(dump(engine), SESSION_FIELDS, dict(zip(sessions, KEYS, strict=True)))
    older["version"] = version
    loaded = load(msgspec.msgpack.decode(msgspec.msgpack.encode(older)))
    rewritten = dump(loaded)
    assert rewritten == dump(engine)
    assert rewritten["version"] == SNAPSHOT_VERSION
    written = msgspec.msgpack.encode(rewritten)
    assert not any(key in written for key in KEYS)
    assert_opens_with_its_key_only(loaded, sessions, 1.0)


@pytest.mark.parametrize("older", [dump_v1, dump_v3, dump_v4])
def test_the_oldest_layouts_of_clear_keys_load_with_each_key_hashed(older: Any) -> None:
    engine = make_engine()
    sessions = [open_session(engine, key=key) for key in KEYS]
    loaded = load(older(engine, keys=dict(zip(sessions, KEYS, strict=True))))
    assert not any(key in msgspec.msgpack.encode(dump(loaded)) for key in KEYS)
    assert_opens_with_its_key_only(loaded, sessions, 1.0)


@pytest.mark.parametrize("digest", [b"short", b"x" * 33, "not bytes", None])
def test_a_snapshot_whose_key_digest_is_not_one_is_refused(digest: object) -> None:
    from tenure.errors import InvalidArgumentError

    engine, _ = engine_of_keyed_sessions()
    data = dump(engine)
    data["sessions"] = [*data["sessions"][:4], digest, *data["sessions"][5:]]
    with pytest.raises(InvalidArgumentError, match="malformed engine snapshot"):
        load(data)
