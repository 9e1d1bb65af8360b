"""A change's watch pushes, encoded once and decoded once (tenure._protocol.fanout).

Both shortcuts must give exactly what the general codec gives: the same bytes for
every push the server makes, the same message for every body the client reads,
whatever the ids, the versions, the descriptions, and whatever else comes in
between.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._core import WatchFired
from tenure._core.values import ClientIdentity, OwnerInfo, SemaphoreDescription, WaiterInfo
from tenure._protocol import LocalProtocolError, Push, Reply
from tenure._protocol.fanout import FiredPushes, FiredPushReader
from tenure._protocol.messages import decode_message, encode_message
from tenure._protocol.older_peers import for_version
from tenure.errors import ProtocolError

UINT_EDGES = [0, 1, 127, 128, 255, 256, 65_535, 65_536, 2**32 - 1, 2**32, 2**64 - 1]


def described(data: bytes, *, owners: bool = False) -> SemaphoreDescription:
    """A description as a watch firing carries it (with an owner and a waiter if asked)."""
    who = ClientIdentity("host", 42, "app")
    return SemaphoreDescription(
        name="s",
        limit=2,
        count=1 if owners else 0,
        data=data,
        ephemeral=False,
        owners=(OwnerInfo(5, 1, b"o", 9, "d", who, 12.5),) if owners else (),
        waiters=(WaiterInfo(6, 1, b"w", "e", who, 13.5),) if owners else (),
    )


def expected(effect: WatchFired, version: int) -> bytes:
    return encode_message(for_version(Push(effect), version))


@pytest.mark.parametrize("version", [1, 2])
def test_every_push_is_the_bytes_the_codec_makes(version: int) -> None:
    pushes = FiredPushes()
    shared = [described(b"x"), described(b"y", owners=True), SemaphoreDescription.missing("s")]
    for description in shared:
        for sid in UINT_EDGES:
            for wid in (0, 300, 2**64 - 1):
                effect = WatchFired(sid, wid, "s", description)
                assert pushes.body(effect, version) == expected(effect, version)


def test_versions_and_descriptions_never_share_bytes() -> None:
    pushes = FiredPushes()
    with_owners = described(b"x", owners=True)
    first = WatchFired(1, 1, "s", with_owners)
    assert pushes.body(first, 2) == expected(first, 2)
    # A version-1 peer gets the owners without who and since: other bytes.
    assert pushes.body(first, 1) == expected(first, 1) != expected(first, 2)
    # An equal-looking but other description object, and another name, are encoded anew.
    other = WatchFired(2, 2, "t", described(b"z"))
    assert pushes.body(other, 2) == expected(other, 2)
    gone = WatchFired(3, 3, "s", None)
    assert pushes.body(gone, 2) == expected(gone, 2)


def test_an_id_out_of_range_is_refused_as_the_codec_refuses_it() -> None:
    pushes = FiredPushes()
    description = described(b"x")
    pushes.body(WatchFired(1, 1, "s", description), 2)
    for sid, wid in ((2**64, 1), (1, -1)):
        with pytest.raises(LocalProtocolError, match=r"session_id|watch_id"):
            pushes.body(WatchFired(sid, wid, "s", description), 2)


def test_reading_a_run_of_pushes_gives_what_the_codec_gives() -> None:
    reader = FiredPushReader()
    one, two = described(b"1"), described(b"2", owners=True)
    effects = [WatchFired(sid, sid + 7, "s", one) for sid in UINT_EDGES[:-1]]
    effects += [WatchFired(sid, 3, "s", two) for sid in (1, 300, 70_000)]
    effects += [WatchFired(4, 4, "s", one), WatchFired(9, 9, "s", None)]
    for effect in effects:
        body = encode_message(Push(effect))
        message = reader.decode(body)
        assert message == decode_message(body) == Push(effect)
        # Anything else in between is decoded as ever, and breaks no run.
        assert reader.decode(encode_message(Reply(3, None))) == Reply(3, None)


def test_a_run_shares_one_description_object() -> None:
    reader = FiredPushReader()
    description = described(b"x", owners=True)
    got = [reader.decode(encode_message(Push(WatchFired(s, s, "s", description)))) for s in (1, 2)]
    first, second = (message.effect for message in got if isinstance(message, Push))
    assert isinstance(first, WatchFired)
    assert isinstance(second, WatchFired)
    assert second.description is first.description
    assert second.session_id == 2


def test_a_broken_push_after_a_good_one_is_still_refused() -> None:
    reader = FiredPushReader()
    good = encode_message(Push(WatchFired(1, 1, "s", described(b"x"))))
    reader.decode(good)
    for broken in (good[:5], good[:-1], good[:4] + b"\xd0\xff" + good[5:]):
        with pytest.raises(ProtocolError):
            decode_message(broken)
        with pytest.raises(ProtocolError):
            reader.decode(broken)


@given(
    st.lists(
        st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2])),
        max_size=20,
    )
)
def test_any_sequence_reads_and_writes_as_the_codec(rows: list[tuple[int, int, int]]) -> None:
    descriptions = [described(b"a"), described(b"b", owners=True), None]
    pushes, reader = FiredPushes(), FiredPushReader()
    for sid, wid, which in rows:
        effect = WatchFired(sid, wid, "s", descriptions[which])
        body = pushes.body(effect, 2)
        assert body == expected(effect, 2)
        assert reader.decode(body) == Push(effect)


def test_ids_laid_out_otherwise_read_as_the_codec_reads_them() -> None:
    """Another encoder may pack ids longer than needed: still the same message."""
    description = described(b"x")
    good = encode_message(Push(WatchFired(5, 7, "s", description)))
    head, tail = good[:4], good[6:]  # the ids 5 and 7 are one byte each
    bodies = [
        head + b"\xcd\x00\x05" + b"\x07" + tail,  # 5 as a uint 16
        head + b"\x05" + b"\xcf" + (7).to_bytes(8, "big") + tail,  # 7 as a uint 64
        head + b"\xd0\x05" + b"\x07" + tail,  # 5 as an int 8: still an unsigned value
        head + b"\x05\x07\x08" + tail,  # three ints: not a push
        head + b"\xd0\xfb" + b"\x07" + tail,  # -5: not a uint
    ]
    for first in (None, good, bodies[0]):
        reader = FiredPushReader()
        if first is not None:
            reader.decode(first)
        for body in bodies:
            try:
                expected_message = decode_message(body)
            except ProtocolError:
                with pytest.raises(ProtocolError):
                    reader.decode(body)
            else:
                assert reader.decode(body) == expected_message
