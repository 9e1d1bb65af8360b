"""Framing: length prefix, strict msgpack decoding, and refusing big frames early."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._core import AlterNode
from tenure._protocol import FrameTooLargeError, LocalProtocolError, Request
from tenure._protocol.frames import (
    DEFAULT_MAX_FRAME_SIZE,
    MAX_MAX_FRAME_SIZE,
    MIN_MAX_FRAME_SIZE,
    FrameReader,
    encode_frame,
)
from tenure._protocol.messages import decode_message
from tenure.errors import LimitExceededError, ProtocolError
from tests.protocol.helpers import message_of, pack, unpack


def test_a_frame_is_a_big_endian_length_and_a_msgpack_body():
    assert encode_frame(pack([3, 7])) == bytes.fromhex("00000003920307")
    assert DEFAULT_MAX_FRAME_SIZE == 1 << 20


def test_encode_refuses_a_body_over_the_limit():
    with pytest.raises(FrameTooLargeError, match="the peer accepts at most 10") as caught:
        encode_frame(pack([b"x" * 10]), limit=10)
    assert isinstance(caught.value, LimitExceededError)
    assert len(encode_frame(pack([b"x" * 7]), limit=10)) == 4 + 10  # 0x91 0xc4 0x07 + 7


@pytest.mark.parametrize("size", [0, MIN_MAX_FRAME_SIZE - 1, MAX_MAX_FRAME_SIZE + 1, 2.0, True])
def test_max_frame_size_is_checked(size):
    with pytest.raises(LocalProtocolError, match="max_frame_size"):
        FrameReader(size)


# -- the reader -------------------------------------------------------------------------


def test_the_reader_cuts_bodies_out_of_any_split():
    data = encode_frame(pack([1])) + encode_frame(pack(["two", b"2"])) + encode_frame(pack([]))
    reader = FrameReader()
    bodies = []
    for i in range(len(data)):
        reader.feed(data[i : i + 1])
        while (body := reader.next_body()) is not None:
            bodies.append(unpack(body))
    assert bodies == [[1], ["two", b"2"], []]
    assert reader.buffered == 0


def test_an_oversized_length_is_refused_before_the_body_is_buffered():
    reader = FrameReader(MIN_MAX_FRAME_SIZE)
    reader.feed((MIN_MAX_FRAME_SIZE + 1).to_bytes(4, "big"))
    # Nothing of the body has arrived, and the frame is refused already.
    with pytest.raises(ProtocolError, match=f"frame of {MIN_MAX_FRAME_SIZE + 1} bytes announced"):
        reader.next_body()
    # Whatever comes after is not kept.
    reader.feed(b"x" * 100_000)
    assert reader.buffered == 0
    with pytest.raises(ProtocolError, match="announced"):
        reader.next_body()


@pytest.mark.parametrize(
    ("first_bytes", "said"),
    [
        (b"HTTP/1.0 400 Bad Request\r\n", "the peer speaks HTTP ('HTTP/1.0 400 Bad Request')"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "the peer speaks HTTP ('GET / HTTP/1.1')"),
        (b"-ERR unknown command\r\n", "the peer sent text ('-ERR unknown command')"),
        (b"\x15\x03\x03\x00\x02\x02\x46", "the peer speaks TLS and this end plain TCP"),
        (b"\x16\x03\x01\x02\x00\x01", "the peer speaks TLS and this end plain TCP"),
    ],
)
def test_a_peer_of_another_protocol_is_named_not_read_as_a_length(first_bytes, said):
    # Four bytes of text read as a length are over 500 MB: the error says what the
    # peer speaks instead ("HTTP" was "a frame of 1213486160 bytes").
    reader = FrameReader()
    reader.feed(first_bytes)
    with pytest.raises(ProtocolError) as refused:
        reader.next_body()
    assert said in str(refused.value)
    assert "bytes announced" not in str(refused.value)


def test_an_oversized_binary_frame_still_says_its_length():
    reader = FrameReader(MIN_MAX_FRAME_SIZE)
    reader.feed(b"\x7f\x00\x00\x00" + b"\x00" * 10)
    with pytest.raises(ProtocolError, match="frame of 2130706432 bytes announced"):
        reader.next_body()


def test_an_oversized_frame_behind_good_ones_is_refused_after_them():
    reader = FrameReader(MIN_MAX_FRAME_SIZE)
    reader.feed(encode_frame(pack([1])) + (2**32 - 1).to_bytes(4, "big") + b"\x00" * 10)
    assert reader.next_body() == msgpack.packb([1])
    assert reader.buffered == 0
    with pytest.raises(ProtocolError, match="announced"):
        reader.next_body()


def test_a_frame_of_exactly_the_limit_is_accepted():
    reader = FrameReader(MIN_MAX_FRAME_SIZE)
    body = msgpack.packb([b"x" * (MIN_MAX_FRAME_SIZE - 4)])  # fixarray, bin16 header
    assert len(body) == MIN_MAX_FRAME_SIZE
    reader.feed(len(body).to_bytes(4, "big") + body)
    assert reader.next_body() == body


def test_end_of_stream_in_the_middle_of_a_frame_is_an_error():
    reader = FrameReader()
    reader.feed(encode_frame(pack([1]))[:-1])
    assert reader.next_body() is None
    reader.feed(b"")
    assert reader.eof
    with pytest.raises(ProtocolError, match="closed in the middle of a frame"):
        reader.next_body()
    with pytest.raises(ProtocolError, match="closed in the middle of a frame"):
        reader.next_body()


def test_end_of_stream_after_a_header_fragment_is_an_error():
    reader = FrameReader()
    reader.feed(b"\x00\x00")
    reader.feed(b"")
    with pytest.raises(ProtocolError, match="2 bytes left"):
        reader.next_body()


# -- strict decoding (of a message's body: msgspec reads it straight into the message) ---


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "not valid msgpack: input data was truncated"),
        (b"\x92\x01", "truncated"),
        (b"\x91\x01\x02", "trailing characters"),
        (b"\xc1", "not valid msgpack"),  # never used
        (b"\xa2\xff\xfe", "utf-8"),
        (msgpack.packb([msgpack.ExtType(1, b"x")]), "ext"),
        (msgpack.packb(msgpack.Timestamp(1, 0)), "malformed message"),
        (msgpack.packb({1: 2}), "got map"),
        (b"\x91" * 5000 + b"\x01", ""),  # nested too deep
        (b"\xdd\x7f\xff\xff\xff", "truncated"),  # 2**31-1 elements announced in 5 bytes
        (b"\xc6\x7f\xff\xff\xff", "truncated"),  # a 2 GiB bin announced
        (b"\xdb\x7f\xff\xff\xff", "truncated"),  # a 2 GiB str announced
        (b"\xdf\x7f\xff\xff\xff", "truncated"),
    ],
)
def test_decode_is_strict(body, why):
    with pytest.raises(ProtocolError) as caught:
        decode_message(body)
    assert why.lower() in str(caught.value).lower()


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        (b"\x82\xa1a\x01\xa1a\x02", "repeats a key"),
        (msgpack.packb({1: 2}), "expected a str key"),
        (msgpack.packb({"a": msgpack.ExtType(1, b"x")}), "['a']: expected nil, bool, int"),
        (msgpack.packb({"a": float("nan")}), "['a']: expected a finite number"),
    ],
)
def test_the_one_map_is_strict(changes, why):
    """AlterNode's changes, the only map a message holds: str keys, none repeated, scalars."""
    start = msgpack.packb([2, 1, [3, "n"]])
    # The map goes in as bytes, so that it can repeat a key: [2, 1, [3, "n", changes]].
    body = b"\x93\x02\x01\x93" + start[4:] + changes
    assert start[:4] == b"\x93\x02\x01\x92"
    with pytest.raises(ProtocolError, match=r"Request\.command\(AlterNode\)\.changes") as caught:
        decode_message(body)
    assert why in str(caught.value)
    assert message_of([2, 1, [3, "n", {"a": 1}]]) == Request(1, AlterNode("n", {"a": 1}))


def test_decode_keeps_bin_and_str_apart():
    with pytest.raises(ProtocolError, match="expected bin"):
        message_of([2, 1, [25, 1, "n", "str"]])
    with pytest.raises(ProtocolError, match="expected a str"):
        message_of([2, 1, [25, 1, b"n", b"bin"]])


@given(st.binary(max_size=64))
def test_decode_of_any_bytes_is_a_message_or_a_protocol_error(data):
    with contextlib.suppress(ProtocolError):
        decode_message(data)
