"""The dflockd line codec: framing, request validation, responses and tokens.

The examples are those of the compatibility spec (shared/reference/dflockd-protocol.md,
§12 and §15); the property tests feed arbitrary bytes in arbitrary chunks and
round-trip generated requests through the encoder, the reader and the parser.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._protocol.errors import LocalProtocolError
from tenure.compat.dflockd import codec as wire
from tenure.compat.dflockd.codec import (
    MAX_AUTH_LINE,
    MAX_LIMIT,
    MAX_LINE,
    MAX_SECONDS,
    Acquire,
    Auth,
    Enqueue,
    Frame,
    FrameError,
    LineReader,
    Ping,
    Release,
    Renew,
    ReplicationBarrier,
    Request,
    RequestError,
    StableRef,
    Stats,
    Wait,
    parse,
)

TOKEN = "18b047130f6bb0395302deb41f626ff8"  # the illustrative token of spec §12
COMMANDS = ["l", "sl", "r", "sr", "n", "sn", "e", "se", "w", "sw"]
COMMANDS += ["stats", "ping", "barrier", "auth", "stable-ref"]


def read_all(data: bytes, reader: LineReader | None = None) -> list[Frame | FrameError]:
    """Everything ``reader`` yields after being fed ``data`` in one piece."""
    reader = reader or LineReader()
    reader.feed(data)
    return drain(reader)


def drain(reader: LineReader) -> list[Frame | FrameError]:
    out: list[Frame | FrameError] = []
    while (item := reader.next_frame()) is not None:
        out.append(item)
    return out


def request(command: str, key: str, argument: str) -> Request:
    """Parse the wire bytes of a request, through the reader."""
    (item,) = read_all(wire.frame(command, key, argument))
    assert isinstance(item, Frame)
    return parse(item)


def outcome(item: Frame) -> Request | int:
    """What ``parse`` makes of ``item``: a request, or the code of its RequestError."""
    try:
        return parse(item)
    except RequestError as error:
        code = error.code
    assert code in (3, 4, 5, 6, 7, 8, 9, 13)
    return code


def error_code(command: str, key: str, argument: str) -> int:
    with pytest.raises(RequestError) as caught:
        request(command, key, argument)
    assert str(caught.value)  # a message naming the problem
    return caught.value.code


# -- spec §12: every example request -----------------------------------------------------


@pytest.mark.parametrize(
    ("command", "key", "argument", "expected"),
    [
        # basic lock with renew and release
        ("l", "job-42", "10 60", Acquire("job-42", 10, 1, 60, False)),
        ("n", "job-42", f"{TOKEN} 60", Renew("job-42", TOKEN, 60, False)),
        ("n", "job-42", TOKEN, Renew("job-42", TOKEN, None, False)),
        ("r", "job-42", TOKEN, Release("job-42", TOKEN, False)),
        # try-lock and FIFO hand-off
        ("l", "k1", "5", Acquire("k1", 5, 1, None, False)),
        ("l", "k1", "0", Acquire("k1", 0, 1, None, False)),
        ("e", "k1", "", Enqueue("k1", 1, None, False)),
        ("w", "k2", "1", Wait("k2", 1, False)),
        ("w", "k1", "1", Wait("k1", 1, False)),
        # two-phase fast path
        ("e", "k3", "10", Enqueue("k3", 1, 10, False)),
        ("w", "k3", "5", Wait("k3", 5, False)),
        # semaphores
        ("sl", "pool", "0 2", Acquire("pool", 0, 2, None, True)),
        ("sl", "pool", "0 3", Acquire("pool", 0, 3, None, True)),
        ("se", "pool2", "2 7", Enqueue("pool2", 2, 7, True)),
        # auth, stats; and the forms of §4.1 and §14.3
        ("auth", "_", "s3cret", Auth("s3cret")),
        ("stats", "_", "_", Stats()),
        ("stats", "_", "", Stats()),
        ("ping", "_", "_", Ping()),
        ("barrier", "_", "_", ReplicationBarrier()),
        ("stable-ref", "client-7f3a", "_", StableRef("client-7f3a")),
        # the rest of the semaphore family (§6.5)
        ("sr", "pool", TOKEN, Release("pool", TOKEN, True)),
        ("sn", "pool", f"{TOKEN} 9", Renew("pool", TOKEN, 9, True)),
        ("sn", "pool", TOKEN, Renew("pool", TOKEN, None, True)),
        ("sw", "pool", "3", Wait("pool", 3, True)),
        ("sl", "pool", "4 2 12", Acquire("pool", 4, 2, 12, True)),
        ("se", "pool", "2", Enqueue("pool", 2, None, True)),
    ],
)
def test_the_example_requests_parse(command, key, argument, expected):
    assert request(command, key, argument) == expected


@pytest.mark.parametrize(
    ("command", "key", "argument", "code"),
    [
        ("bogus", "k", "x", 3),  # unknown command
        ("l", "a b", "5", 5),  # white space in the key
        ("l", "k9", "-1", 6),  # negative timeout
        ("l", "k9", "5 0", 9),  # lease 0
        ("l", "k9", "abc", 4),  # not an integer
        ("l", "k9", "1 2 3", 8),  # too many fields
        ("r", "k9", "", 7),  # empty token
    ],
)
def test_the_example_malformed_requests_fail_with_their_code(command, key, argument, code):
    assert error_code(command, key, argument) == code


def test_an_over_long_key_is_fatal_after_the_requests_before_it():
    reader = LineReader()
    reader.feed(wire.frame("ping", "_", "_") + b"l\n" + b"k" * 300 + b"\n5\n")
    assert reader.next_frame() == Frame("ping", "_", "_")
    assert reader.next_frame() == FrameError("line too long", fatal=True)
    assert reader.next_frame() is None


def test_the_example_responses_are_byte_exact():
    assert wire.granted(TOKEN, 60) == f"ok {TOKEN} 60\n".encode()
    assert wire.acquired(TOKEN, 10) == f"acquired {TOKEN} 10\n".encode()
    assert wire.renewed(60) == b"ok 60\n"
    assert wire.renewed(0) == b"ok 0\n"  # clients accept any integer >= 0
    empty = {
        "connections": 1,
        "locks": [],
        "semaphores": [],
        "idle_locks": [],
        "idle_semaphores": [],
    }
    assert wire.stats(empty) == (
        b'ok {"connections":1,"locks":[],"semaphores":[],"idle_locks":[],"idle_semaphores":[]}\n'
    )
    assert wire.parse_token(TOKEN) == (0x18B047130F6BB039, bytes.fromhex("5302deb41f626ff8"))


# -- spec §15 and the lexical rules of §4 ------------------------------------------------


def test_three_lines_are_read_before_validation_and_a_bad_request_keeps_framing():
    # §15.1 and §8: an unknown command still consumes its key and argument lines.
    frames = read_all(b"bogus\nk\nx\n" + b"l\na b\n5\n" + b"ping\n_\n_\n")
    assert frames == [Frame("bogus", "k", "x"), Frame("l", "a b", "5"), Frame("ping", "_", "_")]
    assert [outcome(item) for item in frames if isinstance(item, Frame)] == [3, 5, Ping()]


@pytest.mark.parametrize("command", ["stats", "ping", "barrier"])
@pytest.mark.parametrize(("key", "argument"), [("_", "_"), ("_", ""), ("", ""), ("a b", "1 2 3 x")])
def test_some_commands_ignore_key_and_argument(command, key, argument):
    assert (
        request(command, key, argument)
        == {"stats": Stats(), "ping": Ping(), "barrier": ReplicationBarrier()}[command]
    )


def test_auth_ignores_the_key_and_trims_the_secret():
    assert request("auth", "", " \ts3 cret\t ") == Auth("s3 cret")
    assert request("auth", "a b", "\u3000x\u00a0") == Auth("x")  # Go's TrimSpace is Unicode
    assert request("auth", "_", "") == Auth("")  # the server refuses it, not the parser


def test_enqueue_takes_an_empty_argument_but_not_two_fields():
    assert request("e", "k", "") == Enqueue("k", 1, None, False)
    assert request("e", "k", "  \t ") == Enqueue("k", 1, None, False)
    assert error_code("e", "k", "5 6") == 8


@pytest.mark.parametrize("command", ["L", "Stats", "AUTH", "lock", "s", "", "l "])
def test_commands_are_case_sensitive_and_exact(command):
    assert error_code(command, "k", "5") == 3


@pytest.mark.parametrize("key", ["", "a b", "a\tb", " k", "k ", "a\rb"])
@pytest.mark.parametrize(("command", "argument"), [("l", "5"), ("r", "t"), ("w", "1"), ("se", "2")])
def test_a_key_is_non_empty_without_space_tab_or_cr(key, command, argument):
    assert error_code(command, key, argument) == 5


@pytest.mark.parametrize("key", ["🔒", "a\u00a0b", "x" * 256, "é/ü:_", "\u202eb"])
def test_any_other_key_is_accepted_as_is(key):
    assert request("l", key, "1") == Acquire(key, 1, 1, None, False)


@pytest.mark.parametrize("key", ["\x00\x1f", "k\x1b[0m", "k\x7f", "k\x85"])
@pytest.mark.parametrize(("command", "argument"), [("l", "5"), ("r", "t"), ("w", "1"), ("se", "2")])
def test_a_key_with_control_characters_is_a_bad_key(key, command, argument):
    # Unlike Go's dflockd: a key is a tenure semaphore name, which has no control
    # characters; refused here, it never reaches the engine nor takes a key slot.
    assert error_code(command, key, argument) == 5


def test_the_key_is_checked_before_the_argument_and_fields_left_to_right():
    assert error_code("l", "", "x y z") == 5
    assert error_code("bogus", "", "") == 3
    assert error_code("sl", "k", "-1 0 0") == 6
    assert error_code("sl", "k", "1 0 x") == 13
    assert error_code("sl", "k", "1 x 0") == 4
    assert error_code("n", "k", "t 0") == 9


@pytest.mark.parametrize(
    ("argument", "timeout"),
    [("+5", 5), ("-0", 0), ("007", 7), ("0" * 40 + "3", 3), (str(MAX_SECONDS), MAX_SECONDS)],
)
def test_integers_read_like_go_strconv(argument, timeout):
    assert request("w", "k", argument) == Wait("k", timeout, False)


@pytest.mark.parametrize(
    "text",
    [
        "1.5",
        "0x10",
        "abc",
        "+",
        "-",
        "1_0",
        "\u0663",
        "\uff15",
        "1e3",
        "+-1",
        "--1",
        "\u00b2",
        "9" * 200,
    ],
)
def test_what_go_strconv_refuses_is_not_an_integer(text):
    assert error_code("w", "k", text) == 4
    assert error_code("l", "k", f"1 {text}") == 4
    assert error_code("se", "k", text) == 4


def test_a_huge_integer_is_refused_without_converting_it():
    # int() would raise ValueError past 4300 digits; a Frame made by hand has no cap.
    assert outcome(Frame("w", "k", "9" * 5000)) == 4
    assert outcome(Frame("w", "k", "0" * 5000 + "1")) == Wait("k", 1, False)


def test_integers_beyond_int64_are_not_integers_and_within_are_range_errors():
    assert error_code("w", "k", str(2**63)) == 4
    assert error_code("w", "k", str(-(2**63) - 1)) == 4
    assert error_code("w", "k", str(2**63 - 1)) == 6
    assert error_code("w", "k", str(-(2**63))) == 6


def test_the_ranges_of_timeout_lease_and_limit():
    assert request("l", "k", f"0 {MAX_SECONDS}") == Acquire("k", 0, 1, MAX_SECONDS, False)
    assert error_code("l", "k", f"{MAX_SECONDS + 1}") == 6
    assert error_code("l", "k", "-1") == 6
    assert error_code("l", "k", f"1 {MAX_SECONDS + 1}") == 9
    assert error_code("n", "k", "t -3") == 9
    assert error_code("e", "k", "0") == 9
    assert request("sl", "k", f"0 {MAX_LIMIT}") == Acquire("k", 0, MAX_LIMIT, None, True)
    assert request("se", "k", "1 1") == Enqueue("k", 1, 1, True)
    assert error_code("sl", "k", f"0 {MAX_LIMIT + 1}") == 13
    assert error_code("se", "k", "0") == 13
    assert error_code("se", "k", "-2 5") == 13


@pytest.mark.parametrize(
    ("command", "argument"),
    [
        ("l", ""),
        ("sl", "5"),
        ("sl", "1 2 3 4"),
        ("r", "a b"),
        ("sr", "a b"),
        ("n", ""),
        ("sn", "t 5 6"),
        ("se", ""),
        ("se", "1 2 3"),
        ("w", ""),
        ("w", "  "),
        ("sw", "1 2"),
    ],
)
def test_a_wrong_number_of_fields_is_code_8(command, argument):
    assert error_code(command, "k", argument) == 8


def test_release_of_an_empty_token_is_code_7():
    assert error_code("r", "k", "") == 7
    assert error_code("sr", "k", " \t ") == 7


def test_fields_split_like_go_strings_fields():
    assert request("l", "k", "  10\t\t60  ") == Acquire("k", 10, 1, 60, False)
    assert request("l", "k", "10\u00a060") == Acquire("k", 10, 1, 60, False)  # NBSP is space
    assert request("l", "k", "10\x0b60") == Acquire("k", 10, 1, 60, False)  # so is VT
    assert error_code("l", "k", "10\x1c60") == 4  # Python splits on U+001C, Go does not


def test_tokens_are_any_word_the_server_judges_them():
    assert request("r", "k", " not-hex ") == Release("k", "not-hex", False)
    assert request("n", "k", "ÄÖÜ\t7") == Renew("k", "ÄÖÜ", 7, False)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [("abc", "abc"), ("  abc ", "abc"), ("a b", "a b"), ("~" * 64, "~" * 64), ("!#$%", "!#$%")],
)
def test_stable_ref_takes_printable_ascii_from_the_key_line(ref, expected):
    assert request("stable-ref", ref, "ignored entirely") == StableRef(expected)


@pytest.mark.parametrize("ref", ["", "   ", "x" * 65, "é", "a\x01b", "a\x7fb"])
def test_a_bad_stable_ref_is_code_8(ref):
    assert error_code("stable-ref", ref, "_") == 8


# -- the reader --------------------------------------------------------------------------


@pytest.mark.parametrize("position", [0, 1, 2])
def test_a_line_of_256_bytes_is_accepted_and_257_is_fatal(position):
    lines = [b"l", b"k", b"5"]
    lines[position] = b"1" * MAX_LINE
    assert read_all(b"".join(line + b"\n" for line in lines)) == [
        Frame(*(line.decode() for line in lines))
    ]
    lines[position] = b"1" * (MAX_LINE + 1)
    assert read_all(b"".join(line + b"\n" for line in lines)) == [
        FrameError("line too long", fatal=True)
    ]


def test_crlf_works_and_the_cr_counts_toward_the_cap():
    assert read_all(b"l\r\nk\r\n5 10\r\n") == [Frame("l", "k", "5 10")]
    assert read_all(b"l\nk\n" + b"1" * 255 + b"\r\n") == [Frame("l", "k", "1" * 255)]
    assert read_all(b"l\nk\n" + b"1" * 256 + b"\r\n") == [FrameError("line too long", fatal=True)]


def test_every_trailing_cr_is_stripped_and_inner_crs_are_kept():
    # Go's readLine does strings.TrimRight(line, "\r").
    assert read_all(b"l\r\r\nk\r\r\r\n5\r\n") == [Frame("l", "k", "5")]
    assert read_all(b"l\na\rb\n5\n") == [Frame("l", "a\rb", "5")]


def test_the_auth_argument_may_be_64_kib():
    secret = b"s" * MAX_AUTH_LINE
    assert read_all(b"auth\n_\n" + secret + b"\n") == [Frame("auth", "_", secret.decode())]
    assert read_all(b"auth\r\n_\r\n" + secret[:-1] + b"\r\n") == [
        Frame("auth", "_", secret[:-1].decode())
    ]
    assert read_all(b"auth\n_\n" + secret + b"s\n") == [FrameError("line too long", fatal=True)]


@pytest.mark.parametrize(
    "data",
    [
        b"auth\n" + b"k" * 257 + b"\n_\n",  # only the argument line of auth is long
        b"Auth\n_\n" + b"s" * 257 + b"\n",  # and only for the exact command
        b"l\nk\n" + b"1" * 257 + b"\n",
        b"a" * 65537 + b"\nk\nx\n",
    ],
)
def test_other_lines_keep_the_short_cap(data):
    assert read_all(data) == [FrameError("line too long", fatal=True)]


def test_a_frame_fed_byte_by_byte_and_in_frame_tracks_it():
    data = wire.frame("sl", "pool", "0 2 30") + wire.frame("r", "pool", TOKEN)
    reader = LineReader()
    assert not reader.in_frame
    frames = []
    for i in range(len(data)):
        reader.feed(data[i : i + 1])
        frames += drain(reader)
        complete = data[i] == ord("\n") and data[: i + 1].count(b"\n") % 3 == 0
        assert reader.in_frame is not complete
    assert frames == [Frame("sl", "pool", "0 2 30"), Frame("r", "pool", TOKEN)]
    assert not reader.in_frame
    assert reader.buffered == 0


def test_in_frame_starts_with_any_byte_even_an_empty_line():
    reader = LineReader()
    reader.feed(b"\n")
    assert reader.in_frame
    reader.feed(b"\n\n")
    assert not reader.in_frame  # a whole (empty) request is ready, none started
    assert reader.next_frame() == Frame("", "", "")


def test_several_frames_in_one_feed_come_out_in_order():
    data = b"".join(wire.frame("w", f"k{i}", str(i)) for i in range(50))
    assert read_all(data) == [Frame("w", f"k{i}", str(i)) for i in range(50)]


@pytest.mark.parametrize("bad", [b"l\xff\nk\n5\n", b"l\nk\xc3\n5\n", b"l\nk\n\xed\xa0\x80\n"])
def test_invalid_utf8_is_a_non_fatal_frame_error(bad):
    frames = read_all(bad + b"ping\n_\n_\n")
    assert len(frames) == 2
    assert isinstance(frames[0], FrameError)
    assert not frames[0].fatal
    assert "UTF-8" in frames[0].reason
    assert frames[1] == Frame("ping", "_", "_")


def test_after_a_fatal_error_the_reader_yields_nothing_more():
    reader = LineReader(max_line=8)
    reader.feed(b"ping\n_\n_\nl\n" + b"k" * 9 + b"\n5\nping\n_\n_\n")
    assert drain(reader) == [Frame("ping", "_", "_"), FrameError("line too long", fatal=True)]
    reader.feed(b"ping\n_\n_\n")
    assert reader.next_frame() is None
    assert not reader.in_frame
    assert reader.buffered == 0


@pytest.mark.parametrize(("head", "cap"), [(b"l\n", MAX_LINE), (b"auth\n_\n", MAX_AUTH_LINE)])
def test_an_over_long_line_fails_as_soon_as_it_passes_its_cap(head, cap):
    reader = LineReader()
    reader.feed(head + b"k" * cap)  # exactly the cap: its LF may still come
    assert reader.next_frame() is None
    assert reader.in_frame
    reader.feed(b"k")  # one byte more, and no LF: it cannot be a request any more
    assert drain(reader) == [FrameError("line too long", fatal=True)]
    assert not reader.in_frame
    for _ in range(100):  # a line that never ends is not read for ever
        reader.feed(b"k" * 1000)
        assert reader.buffered == 0
        assert reader.next_frame() is None


def test_end_of_stream():
    reader = LineReader()
    reader.feed(b"l\nk\n")
    reader.feed(b"")
    assert reader.eof
    assert reader.next_frame() is None  # a cut request is no request
    reader.feed(b"")  # saying it again is harmless
    with pytest.raises(LocalProtocolError, match="after the end") as caught:
        reader.feed(b"5\n")
    assert isinstance(caught.value, ValueError)


def test_end_of_stream_after_an_over_long_line_changes_nothing():
    # The error came with the byte past the cap; a half-closed client still reads it.
    reader = LineReader(max_line=4)
    reader.feed(b"l\nkkkkk")
    reader.feed(b"")
    assert drain(reader) == [FrameError("line too long", fatal=True)]


@pytest.mark.parametrize("kwargs", [{"max_line": 0}, {"max_auth_line": -1}, {"max_line": 2.0}])
def test_the_caps_are_checked(kwargs):
    with pytest.raises(LocalProtocolError):
        LineReader(**kwargs)


# -- responses and tokens ----------------------------------------------------------------

FIXED = [
    wire.OK,
    wire.QUEUED,
    wire.TIMEOUT,
    wire.ERROR,
    wire.ERROR_AUTH,
    wire.ERROR_MAX_LOCKS,
    wire.ERROR_MAX_WAITERS,
    wire.ERROR_LIMIT_MISMATCH,
    wire.ERROR_NOT_ENQUEUED,
    wire.ERROR_ALREADY_ENQUEUED,
    wire.ERROR_LEASE_EXPIRED,
    wire.ERROR_DRAINING,
]


def test_the_fixed_answers_are_the_statuses_of_spec_5():
    assert [line.decode() for line in FIXED] == [
        f"{status}\n"
        for status in [
            "ok",
            "queued",
            "timeout",
            "error",
            "error_auth",
            "error_max_locks",
            "error_max_waiters",
            "error_limit_mismatch",
            "error_not_enqueued",
            "error_already_enqueued",
            "error_lease_expired",
            "error_draining",
        ]
    ]


def test_every_response_is_one_lower_case_line_without_trailing_space():
    token = wire.make_token(2**64 - 1, b"\xab" * 8)
    lines = [*FIXED, wire.granted(token, 33), wire.acquired(token, 1), wire.renewed(33)]
    lines.append(wire.stats({"connections": 0, "locks": [{"key": "a\nb"}]}))
    for line in lines:
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        assert not line[:-1].endswith((b" ", b"\r"))
        status = line.split()[0]
        assert status == status.lower()
    assert token == token.lower()


def test_stats_is_compact_utf8_json():
    document = {"connections": 2, "locks": [{"key": "🔒", "lease_expires_in_s": 31.5}]}
    line = wire.stats(document)
    assert (
        line == 'ok {"connections":2,"locks":[{"key":"🔒","lease_expires_in_s":31.5}]}\n'.encode()
    )
    assert json.loads(line[3:]) == document


@pytest.mark.parametrize(
    "document",
    [{"x": float("nan")}, {"x": object()}, {"x": "\ud800"}],
    ids=["nan", "object", "surrogate"],
)
def test_stats_refuses_what_is_not_json_text(document):
    with pytest.raises(LocalProtocolError, match="stats"):
        wire.stats(document)


@pytest.mark.parametrize(
    ("token", "lease"),
    [("", 5), ("a b", 5), ("a\tb", 5), ("t", 0), ("t", MAX_SECONDS + 1), ("t", True)],
)
def test_a_grant_must_be_one_word_and_a_valid_lease(token, lease):
    with pytest.raises(LocalProtocolError):
        wire.granted(token, lease)
    with pytest.raises(LocalProtocolError):
        wire.acquired(token, lease)


@pytest.mark.parametrize("seconds", [-1, 1.0, None])
def test_renewed_takes_a_non_negative_int(seconds):
    with pytest.raises(LocalProtocolError):
        wire.renewed(seconds)


@given(st.integers(0, 2**64 - 1), st.binary(min_size=8, max_size=8))
def test_a_token_round_trips(fence, salt):
    token = wire.make_token(fence, salt)
    assert len(token) == 32
    assert wire.parse_token(token) == (fence, salt)


@given(
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.binary(min_size=8, max_size=8),
    st.binary(min_size=8, max_size=8),
)
def test_token_order_is_fence_order(a, b, salt_a, salt_b):
    if a != b:
        assert (wire.make_token(a, salt_a) < wire.make_token(b, salt_b)) == (a < b)


@pytest.mark.parametrize(
    ("fence", "salt"), [(-1, b"12345678"), (2**64, b"12345678"), (0, b"1234567")]
)
def test_make_token_checks_its_arguments(fence, salt):
    with pytest.raises(LocalProtocolError):
        wire.make_token(fence, salt)


@pytest.mark.parametrize(
    "token",
    [TOKEN.upper(), TOKEN[:-1], TOKEN + "0", TOKEN[:-1] + "g", f" {TOKEN[1:]}", "", "٣" * 32],
)
def test_parse_token_takes_only_32_lower_case_hex(token):
    assert wire.parse_token(token) is None


def test_frame_encodes_three_lines_and_refuses_a_newline():
    assert wire.frame("auth", "_", "s3cret") == b"auth\n_\ns3cret\n"
    assert wire.frame("e", "k", "") == b"e\nk\n\n"
    with pytest.raises(LocalProtocolError, match="LF"):
        wire.frame("l", "a\nb", "5")


# -- properties --------------------------------------------------------------------------

# Streams rich in LFs and CRs, so that the caps and the frame boundaries are hit.
streams = st.lists(
    st.sampled_from([b"\n", b"\r", b"\r\n", b"auth", b"l", b"\xff", b"x" * 7, b" "]) | st.binary(),
    max_size=60,
).map(b"".join)


@given(streams, st.data(), st.sampled_from([(8, 32), (MAX_LINE, MAX_AUTH_LINE)]))
def test_any_stream_in_any_chunks_is_framed_without_raising_or_hoarding(data, draw, caps):
    def fresh() -> LineReader:
        return LineReader(max_line=caps[0], max_auth_line=caps[1])

    reader = fresh()
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(data)), max_size=8)))
    out: list[Frame | FrameError] = []
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        if end > start:  # b"" would mean the end of the stream
            reader.feed(data[start:end])
        # Two short lines and one long one at most: nothing grows with the input.
        assert reader.buffered <= 2 * caps[0] + caps[1]
        out += drain(reader)
    reader.feed(b"")
    out += drain(reader)
    whole = fresh()
    whole.feed(data)
    whole.feed(b"")
    assert out == drain(whole)  # how the bytes were cut does not matter
    assert not any(item.fatal for item in out[:-1] if isinstance(item, FrameError))
    for item in out:
        if isinstance(item, Frame):
            assert isinstance(outcome(item), Request | int)


@given(st.builds(Frame, st.text(max_size=12) | st.sampled_from(COMMANDS), st.text(), st.text()))
def test_parse_of_any_frame_is_a_request_or_a_request_error(item):
    assert isinstance(outcome(item), Request | int)


# Go's unicode.IsSpace, written out independently of the module, LF excluded.
GO_SPACE = "\t\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)
#: Keys tenure keeps: no white space the Go server refuses, no control characters (Cc).
keys = st.text(
    st.characters(codec="utf-8", exclude_characters=" \t\r\n", exclude_categories=["Cc"]),
    min_size=1,
    max_size=40,
)
words = st.text(
    st.characters(codec="utf-8", exclude_characters=GO_SPACE + "\n"), min_size=1, max_size=40
)
seconds = st.integers(0, MAX_SECONDS)
leases = st.none() | st.integers(1, MAX_SECONDS)
limits = st.integers(1, MAX_LIMIT)
secrets = st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=40).map(
    lambda text: text.strip(GO_SPACE)
)
refs = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=64)
requests = st.one_of(
    st.builds(Acquire, keys, seconds, st.just(1), leases, st.just(False)),
    st.builds(Acquire, keys, seconds, limits, leases, st.just(True)),
    st.builds(Release, keys, words, st.booleans()),
    st.builds(Renew, keys, words, leases, st.booleans()),
    st.builds(Enqueue, keys, st.just(1), leases, st.just(False)),
    st.builds(Enqueue, keys, limits, leases, st.just(True)),
    st.builds(Wait, keys, seconds, st.booleans()),
    st.sampled_from([Stats(), Ping(), ReplicationBarrier()]),
    st.builds(Auth, secrets),
    st.builds(StableRef, refs.map(str.strip).filter(bool)),
)


def encode(item: Request, gap: str) -> tuple[str, str, str]:
    """The three lines a client would send for ``item``, fields joined by ``gap``."""

    def join(*fields: object) -> str:
        return gap.join(str(field) for field in fields if field is not None)

    s = "s" if getattr(item, "semaphore", False) else ""
    match item:
        case Acquire(key, timeout, limit, lease, semaphore):
            return f"{s}l", key, join(timeout, limit if semaphore else None, lease)
        case Release(key, token):
            return f"{s}r", key, token
        case Renew(key, token, lease):
            return f"{s}n", key, join(token, lease)
        case Enqueue(key, limit, lease, semaphore):
            return f"{s}e", key, join(limit if semaphore else None, lease)
        case Wait(key, timeout):
            return f"{s}w", key, join(timeout)
        case Stats():
            return "stats", "_", "_"
        case Ping():
            return "ping", "_", "_"
        case ReplicationBarrier():
            return "barrier", "_", "_"
        case Auth(secret):
            return "auth", "_", secret
        case StableRef(ref):
            return "stable-ref", ref, "_"
    raise AssertionError(item)


@given(requests, st.text(st.sampled_from(GO_SPACE), min_size=1, max_size=3), st.booleans())
def test_encoded_requests_round_trip_through_reader_and_parser(item, gap, padded):
    command, key, argument = encode(item, gap)
    if padded:
        argument = gap + argument + gap  # white space around the fields is ignored
    assert request(command, key, argument) == item
