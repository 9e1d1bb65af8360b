"""Commands, reply values and effects: every one round-trips, and every field is checked."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireFailed,
    AcquireResult,
    AcquireStatus,
    AdoptHold,
    AlterNode,
    AttachSession,
    ClaimName,
    ClaimRecord,
    CreateNode,
    CreateSession,
    DescribeResult,
    NodeConfig,
    NodeDescription,
    OwnerInfo,
    ReleaseClaim,
    Renew,
    ResumeSession,
    SemaphoreDescription,
    SessionEnded,
    WaiterInfo,
    WatchFired,
)
from tenure._core.values import ClientIdentity
from tenure._core.why_report import WhyLink, WhyReport, WhyWait
from tenure._protocol import LocalProtocolError, Push, Reply, Request
from tenure._protocol.messages import MESSAGE
from tenure._protocol.older_peers import for_version
from tenure._protocol.payloads import (
    COMMAND,
    EFFECT,
    NODE_CONFIG,
    VALUE,
    decode_command,
    encode_command,
    layout,
    reply_fits,
)
from tenure._protocol.wire import (
    ArrayOf,
    Field,
    Optional,
    Record,
    Union,
    WireError,
)
from tenure.errors import ErrorCode, InvalidArgumentError, ProtocolError
from tests.protocol.helpers import field_sites, message_of, replace_at, wire_of
from tests.protocol.strategies import (
    COMMAND_TYPES,
    EFFECT_TYPES,
    REPLY_RECORD_TYPES,
    command_and_reply,
    commands_,
    effects_,
    messages,
    reply_values,
    sample_messages,
)


def round_trip(message: Any) -> Any:
    return message_of(wire_of(message))


# -- completeness and stability ---------------------------------------------------------


def test_every_command_effect_and_reply_type_has_a_schema():
    assert set(COMMAND.by_type) == set(COMMAND_TYPES)
    assert set(EFFECT.by_type) == set(EFFECT_TYPES)
    assert set(VALUE.records.by_type) == set(REPLY_RECORD_TYPES)


def _records() -> Iterator[Record]:
    seen: set[int] = set()
    stack: list[Field] = [MESSAGE]
    while stack:
        field = stack.pop()
        if id(field) in seen:
            continue
        seen.add(id(field))
        if isinstance(field, Union):
            stack += field.records
        elif isinstance(field, Record):
            yield field
            stack += [inner for _, inner in field.fields]
        elif isinstance(field, Optional | ArrayOf):
            stack.append(field.inner)
        elif field is VALUE:
            stack.append(VALUE.records)


ALL_RECORDS = sorted(_records(), key=lambda record: record.name)


def test_the_walk_finds_every_record():
    names = {record.name for record in ALL_RECORDS}
    assert {"NodeConfig", "OwnerInfo", "WaiterInfo", "SemaphoreDescription", "Hello"} <= names
    assert {"HeldGrant", "QueuedAcquire", "SessionState"} <= names
    assert {"ClientIdentity", "SemaphoreSummary", "SessionSummary"} <= names
    assert {"ClusterView", "MemberView", "CellView"} <= names
    assert {"WhyReport", "WhyHolder", "WhyWait", "WhyWaiter", "WhyLink", "WhyRoot"} <= names
    assert {"TopReport", "NameStat"} <= names
    # Commands, effects, 16 reply records, 18 records inside them, 10 messages.
    assert len(ALL_RECORDS) == len(COMMAND_TYPES) + len(EFFECT_TYPES) + 16 + 18 + 10


@pytest.mark.parametrize("record", ALL_RECORDS, ids=lambda r: r.name)
def test_schema_lists_every_dataclass_field_in_order(record):
    names = [name for name, _ in record.fields]
    assert names == [field.name for field in dataclasses.fields(record.cls)]


# The tags are the protocol: changing one breaks every deployed peer. Any change here
# is a new protocol version (and docs/protocol.md changes with it); the one exception,
# SetNodeAnnex and GetNodeAnnex (new tags, within version 2), is explained in its section 14;
# ClusterStatus and ClusterView came with version 3, ReadBackup, ReloadFiles and
# FilesReloaded with version 8, WhyName, WhyReport, TopNames and TopReport with version 9.
STABLE_TAGS = {
    "CreateNode": 1, "DescribeNode": 2, "AlterNode": 3, "DropNode": 4,
    "ListNodes": 5, "SetNodeAnnex": 6, "GetNodeAnnex": 7, "WhyName": 8,
    "TopNames": 9,
    "CreateSession": 10, "AttachSession": 11, "DetachSession": 12, "CloseSession": 13,
    "DescribeSession": 14,
    "ResumeSession": 15,
    "KillSession": 16, "ListSessions": 17,
    "CreateSemaphore": 20, "Acquire": 21, "Release": 22, "CancelAcquire": 23, "Renew": 24,
    "UpdateSemaphore": 25, "DeleteSemaphore": 26, "DescribeSemaphore": 27, "CancelWatch": 28,
    "ListSemaphores": 29, "ClusterStatus": 30, "SwapSemaphoreData": 31, "ReserveUnits": 32,
    "AcquireAll": 33, "ClaimName": 34, "ReleaseClaim": 35, "WatchPrefix": 40,
    "OfferHold": 41, "AdoptHold": 42, "ReadBackup": 43, "ReloadFiles": 44,
    "Granted": 1, "AcquireFailed": 2, "LeaseLost": 3, "WatchFired": 4, "SessionEnded": 5,
    "SessionInfo": 1, "AcquireResult": 2, "NodeDescription": 3, "DescribeResult": 4,
    "SessionState": 5, "NodePage": 6, "SemaphorePage": 7, "SessionPage": 8, "ClusterView": 9,
    "RateReservation": 10, "AcquireAllResult": 11, "ClaimRecord": 12, "WhyReport": 13,
    "TopReport": 14,
    "WatchArmed": 16,
    "FilesReloaded": 17,
    "Hello": 1, "Request": 2, "Ping": 3, "Welcome": 11, "Refused": 12, "Reply": 13,
    "Failure": 14, "Push": 15, "Pong": 16, "GoingAway": 17,
}  # fmt: skip


def test_tags_are_stable():
    unions = [COMMAND, EFFECT, VALUE.records, MESSAGE]
    tags = {record.name: record.tag for union in unions for record in union.records}
    assert tags == STABLE_TAGS


def test_a_layout_renders_tag_and_typed_fields():
    acquire = COMMAND.by_type[Acquire]
    assert layout(acquire) == (
        "[21, session_id: uint, name: str, count: uint, request_id: uint, data: bin, "
        "timeout: float|nil, ephemeral: bool, lease_ttl: float|nil, hold: uint, "
        "keep_place: bool, task: uint, max_hold: float|nil]"
    )
    assert layout(NODE_CONFIG).startswith("[recovery_window: float, lock_delay: float,")


# -- round trips ------------------------------------------------------------------------


@given(commands_, st.integers(0, 2**64 - 1))
def test_every_command_round_trips(command, request_id):
    message = Request(request_id, command)
    decoded = round_trip(message)
    assert decoded == message
    assert type(decoded.command) is type(command)


@given(command_and_reply(), st.integers(0, 2**64 - 1))
def test_every_reply_round_trips(pair, request_id):
    command, value = pair
    decoded = round_trip(Reply(request_id, value))
    assert decoded == Reply(request_id, value)
    assert type(decoded.value) is (float if type(value) is int else type(value))
    assert reply_fits(type(command), decoded.value)


@given(reply_values)
def test_every_reply_value_round_trips(value):
    assert round_trip(Reply(1, value)).value == value


@given(effects_)
def test_every_effect_round_trips(effect):
    decoded = round_trip(Push(effect))
    assert decoded == Push(effect)
    assert type(decoded.effect) is type(effect)


@given(messages)
def test_every_message_round_trips(message):
    assert round_trip(message) == message


@pytest.mark.parametrize("message", sample_messages(), ids=lambda m: type(m).__name__)
def test_every_sample_round_trips(message):
    assert round_trip(message) == message


def test_max_count_and_the_uint64_range_survive():
    command = Acquire(MAX_COUNT, "n", MAX_COUNT, MAX_COUNT, timeout=0)
    assert round_trip(Request(MAX_COUNT, command)) == Request(MAX_COUNT, command)
    result = AcquireResult(AcquireStatus.GRANTED, token=MAX_COUNT, count=MAX_COUNT)
    assert round_trip(Reply(0, result)).value == result


def test_acquire_status_is_a_small_number():
    statuses = {status: wire_of(Reply(1, AcquireResult(status)))[2][1] for status in AcquireStatus}
    assert statuses == {AcquireStatus.GRANTED: 0, AcquireStatus.QUEUED: 1, AcquireStatus.BUSY: 2}


def test_alter_node_changes_is_a_map_of_scalars():
    changes = {"max_sessions": 3, "default_lease": None, "lock_delay": 0.5, "x": "y", "b": True}
    wire = wire_of(Request(1, AlterNode("n", changes)))
    assert wire == [2, 1, [3, "n", changes]]
    assert round_trip(Request(1, AlterNode("n", changes))).command.changes == changes


# -- what decoding accepts and refuses --------------------------------------------------


def test_an_int_loads_into_a_float_field():
    body = [2, 1, [24, 1, "lease", 5, 0]]  # Renew(lease_ttl=5): other languages may pack 5
    command = message_of(body).command  # type: ignore[union-attr]
    assert command == Renew(1, "lease", 5.0)
    assert type(command.lease_ttl) is float
    assert message_of([13, 1, 30]) == Reply(1, 30.0)


def test_an_unknown_error_code_loads_as_internal():
    effect = message_of([15, [5, 1, 999, "from a newer server"]])
    assert effect == Push(SessionEnded(1, ErrorCode.INTERNAL, "from a newer server"))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_are_refused_both_ways(bad):
    with pytest.raises(LocalProtocolError, match=r"Request\.command\(Acquire\)\.timeout"):
        wire_of(Request(1, Acquire(1, "n", 1, 1, timeout=bad)))
    with pytest.raises(
        ProtocolError,
        match=r"Request\.command\(CreateNode\)\.config\.lock_delay: expected a finite",
    ):
        message_of([2, 1, [1, "n", [30.0, bad, None, 1, 1, 1, 1, 1, 1]]])


def test_bytes_and_text_are_not_interchangeable():
    with pytest.raises(ProtocolError, match=r"data: expected bin"):
        message_of([2, 1, [25, 1, "n", "text, not bytes"]])
    with pytest.raises(ProtocolError, match=r"name: expected a str"):
        message_of([2, 1, [25, 1, b"bytes", b"data"]])


def test_bool_is_not_an_int():
    with pytest.raises(ProtocolError, match=r"session_id: expected an unsigned integer"):
        message_of([2, 1, [13, True]])


def test_unknown_tags_are_refused():
    with pytest.raises(ProtocolError, match="unknown message tag: int 99"):
        message_of([99])
    with pytest.raises(ProtocolError, match=r"Request\.command: unknown command tag: int 19"):
        message_of([2, 1, [19, "n"]])
    with pytest.raises(ProtocolError, match=r"Push\.effect: unknown effect tag: str"):
        message_of([15, ["1"]])


def test_wrong_arity_is_refused():
    with pytest.raises(ProtocolError, match="DropNode has 2 fields, got 3"):
        message_of([2, 1, [4, "n", False, "extra"]])
    with pytest.raises(ProtocolError, match="Ping has 1 fields, got 0"):
        message_of([3])


def test_the_path_names_nested_fields():
    body = wire_of(Request(1, CreateNode("n", NodeConfig())))
    body[2][2][3] = -1
    with pytest.raises(ProtocolError) as caught:
        message_of(body)
    assert "Request.command(CreateNode).config.max_sessions" in str(caught.value)


def test_encoding_checks_fields_and_names_them():
    with pytest.raises(LocalProtocolError, match=r"Request\.command\(Acquire\)\.count"):
        wire_of(Request(1, Acquire(1, "n", -1, 1)))
    with pytest.raises(LocalProtocolError, match=r"\.name: str is not valid UTF-8"):
        wire_of(Request(1, Acquire(1, "\ud800", 1, 1)))
    with pytest.raises(LocalProtocolError, match=r"Push\.effect\(AcquireFailed\)\.code"):
        wire_of(Push(AcquireFailed(1, 1, "n", 20, "plain int")))  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError, match=r"Request\.command: expected a command"):
        wire_of(Request(1, "not a command"))  # type: ignore[arg-type]


def test_local_errors_are_invalid_arguments_not_protocol_errors():
    with pytest.raises(LocalProtocolError) as caught:
        wire_of(Request(1, Acquire(1, "n", 2**64, 1)))
    assert isinstance(caught.value, InvalidArgumentError)
    assert isinstance(caught.value, ValueError)
    assert not isinstance(caught.value, ProtocolError)


# -- wrong types in every field ---------------------------------------------------------

WRONG: list[Any] = [None, True, -1, 1.5, "s", b"b", [], {}, [1, 2, 3], {"k": []}, 2**64 - 1]


def _label(message: Any) -> str:
    inner = getattr(message, "command", None) or getattr(message, "effect", None)
    inner = inner if inner is not None else getattr(message, "value", None)
    variant = f"({type(inner).__name__})" if dataclasses.is_dataclass(inner) else ""
    return type(message).__name__ + variant


SITES = [
    (message, name, path)
    for message in sample_messages()
    for name, path in field_sites(MESSAGE, wire_of(message))
]


@pytest.mark.parametrize(
    ("message", "name", "path"),
    SITES,
    ids=[f"{_label(m)}-{'.'.join(map(str, p))}-{n}" for m, n, p in SITES],
)
def test_a_wrong_type_in_any_field_is_a_protocol_error_naming_it(message, name, path):
    wire = wire_of(message)
    errors: list[str] = []
    for bad in WRONG:
        try:
            message_of(replace_at(wire, path, bad))
        except ProtocolError as error:
            errors.append(str(error))
    assert len(errors) >= 5
    assert all(str(name) in error for error in errors), errors


def test_every_field_of_every_record_is_exercised():
    named = {(type(m).__name__, n) for m, n, _ in SITES}
    covered = {name for _, name in named}
    for record in ALL_RECORDS:
        for name, _ in record.fields:
            assert name in covered, (record.name, name)


def test_schema_error_paths_join_readably():
    error = WireError("bad")
    for segment in reversed(
        ["Reply", "value", "(DescribeResult)", "description", "owners", "[0]", "token"]
    ):
        error.within(segment)
    assert str(error) == "Reply.value(DescribeResult).description.owners[0].token: bad"


# -- protocol version 1 peers -------------------------------------------------------------


def test_a_version_1_create_session_still_decodes() -> None:
    """A version-1 client sends CreateSession without identity: it is nobody in particular."""
    message = message_of([2, 7, [10, "n", b"key", None, "worker"]])
    assert message == Request(7, CreateSession("n", b"key", None, "worker"))
    assert isinstance(message, Request)
    assert isinstance(message.command, CreateSession)
    assert message.command.identity == ClientIdentity()
    with pytest.raises(ProtocolError, match="CreateSession has 4 to 5 fields, got 3"):
        message_of([2, 7, [10, "n", b"key", None]])


def test_owners_and_waiters_at_their_defaults_travel_in_the_version_1_layout() -> None:
    old_owner, old_waiter = OwnerInfo(1, 1, b"d", 9), WaiterInfo(2, 1, b"")
    description = SemaphoreDescription("m", 1, 1, b"", True, (old_owner,), (old_waiter,))
    wire = wire_of(Reply(3, DescribeResult(description)))
    assert wire == [
        13,
        3,
        [4, ["m", 1, 1, b"", True, [[1, 1, b"d", 9]], [[2, 1, b""]], True], None],
    ]
    assert message_of(wire) == Reply(3, DescribeResult(description))


def test_a_version_1_peer_is_sent_owners_without_identity() -> None:
    who = ClientIdentity("h", 5, "w")
    owner = OwnerInfo(1, 1, b"d", 9, "desc", who, 1.5)
    waiter = WaiterInfo(2, 1, b"", "", who, 2.5)
    description = SemaphoreDescription("m", 1, 1, b"", True, (owner,), (waiter,))
    full = wire_of(Reply(3, DescribeResult(description)))
    assert full[2][1][5] == [[1, 1, b"d", 9, "desc", ["h", 5, "w"], 1.5]]
    old = for_version(Reply(3, DescribeResult(description)), 1)
    assert wire_of(old)[2][1][5:7] == [[[1, 1, b"d", 9]], [[2, 1, b""]]]
    fired = for_version(Push(WatchFired(1, 2, "m", description)), 1)
    assert fired == Push(
        WatchFired(
            1,
            2,
            "m",
            dataclasses.replace(
                description, owners=(OwnerInfo(1, 1, b"d", 9),), waiters=(WaiterInfo(2, 1, b""),)
            ),
        )
    )
    assert for_version(Reply(3, DescribeResult(description)), 2) == Reply(
        3, DescribeResult(description)
    )


# -- protocol version 6: claims, and NodeConfig's max_claims -----------------------------


def test_max_claims_at_its_default_travels_in_the_older_layout() -> None:
    """A NodeConfig of version 5 had 9 fields: max_claims at its default is not sent, and
    9 fields read as that default (an older client's CreateNode, an older journal's)."""
    default = NodeConfig()
    assert len(wire_of(Request(1, CreateNode("n", default)))[2][2]) == 9
    assert len(wire_of(Request(1, CreateNode("n", NodeConfig(max_claims=5))))[2][2]) == 10
    nine = wire_of(Request(1, CreateNode("n", default)))
    assert message_of(nine) == Request(1, CreateNode("n", default))
    ten = wire_of(Request(1, CreateNode("n", NodeConfig(max_claims=5))))
    assert message_of(ten) == Request(1, CreateNode("n", NodeConfig(max_claims=5)))


def test_a_peer_older_than_version_6_is_sent_nodes_without_max_claims() -> None:
    described = NodeDescription("n", NodeConfig(max_claims=5, max_sessions=3), 1, 2)
    for version in (1, 2, 3, 4, 5):
        old = for_version(Reply(3, described), version)
        assert isinstance(old, Reply)
        assert old.value == NodeDescription("n", NodeConfig(max_sessions=3), 1, 2)
        assert len(wire_of(old)[2][2]) == 9  # the layout that peer knows
    assert for_version(Reply(3, described), 6) == Reply(3, described)
    assert for_version(Reply(3, described), None) == Reply(3, described)


def test_a_claim_and_its_release_travel_as_documented() -> None:
    claim = ClaimName(4, "nightly", "a" * 32, 60.0, 600.0, b"task", 1.5)
    assert wire_of(Request(1, claim))[2] == [34, 4, "nightly", "a" * 32, 60.0, 600.0, b"task", 1.5]
    release = ReleaseClaim("app", "nightly", "a" * 32, 2.5)
    assert wire_of(Request(1, release))[2] == [35, "app", "nightly", "a" * 32, 2.5]
    record = ClaimRecord("a" * 32, 9, 1.5, 60.0, 600.0, None, 4, b"")
    assert wire_of(Reply(1, record))[2] == [12, "a" * 32, 9, 1.5, 60.0, 600.0, None, 4, b""]
    assert message_of(wire_of(Reply(1, record))) == Reply(1, record)
    assert reply_fits(ClaimName, record)
    assert reply_fits(ReleaseClaim, True)


# -- protocol version 7: max_hold on Acquire and NodeConfig --------------------------------


def test_max_hold_is_sent_only_when_set_so_an_acquire_without_is_version_6s() -> None:
    plain = Acquire(3, "db", 1, 7, task=5)
    assert len(wire_of(Request(1, plain))[2]) == 12  # [21, ..., task]: version 6's layout
    bounded = Acquire(3, "db", 1, 7, max_hold=2.5)
    assert wire_of(Request(1, bounded))[2][-2:] == [0, 2.5]  # (task 0 is sent before it)
    assert message_of(wire_of(Request(1, bounded))) == Request(1, bounded)
    config = NodeConfig(max_hold=30.0)
    eleven = wire_of(Request(1, CreateNode("n", config)))
    assert eleven[2][2][-2:] == [NodeConfig().max_claims, 30.0]  # max_claims sent before it
    assert message_of(eleven) == Request(1, CreateNode("n", config))
    assert len(wire_of(Request(1, CreateNode("n", NodeConfig(max_claims=5))))[2][2]) == 10


def test_a_peer_older_than_version_7_is_sent_nodes_without_max_hold() -> None:
    described = NodeDescription("n", NodeConfig(max_hold=30.0, max_claims=5), 1, 2)
    old = for_version(Reply(3, described), 6)
    assert isinstance(old, Reply)
    assert old.value == NodeDescription("n", NodeConfig(max_claims=5), 1, 2)
    assert len(wire_of(old)[2][2]) == 10  # the layout a version-6 peer knows
    older = for_version(Reply(3, described), 5)
    assert isinstance(older, Reply)
    assert older.value == NodeDescription("n", NodeConfig(), 1, 2)
    assert for_version(Reply(3, described), 7) == Reply(3, described)


# -- protocol version 10: a node's long_hold -------------------------------------------------


def test_long_hold_is_sent_only_when_set_after_max_claims_and_max_hold() -> None:
    config = NodeConfig(long_hold=300.0)
    twelve = wire_of(Request(1, CreateNode("n", config)))
    assert twelve[2][2][-3:] == [NodeConfig().max_claims, None, 300.0]  # (max_hold nil)
    assert message_of(twelve) == Request(1, CreateNode("n", config))
    off = NodeConfig(long_hold=0.0, max_hold=30.0)  # (0 is a setting: sent)
    assert wire_of(Request(1, CreateNode("n", off)))[2][2][-2:] == [30.0, 0.0]
    assert message_of(wire_of(Request(1, CreateNode("n", off)))) == Request(1, CreateNode("n", off))
    assert len(wire_of(Request(1, CreateNode("n", NodeConfig(max_hold=30.0))))[2][2]) == 11
    for value in (300.0, 0.0, None):  # AlterNode's changes: a map, by name
        alter = Request(1, AlterNode("n", {"long_hold": value}))
        assert wire_of(alter)[2] == [3, "n", {"long_hold": value}]
        assert message_of(wire_of(alter)) == alter


def test_a_peer_older_than_version_10_is_sent_nodes_without_long_hold() -> None:
    described = NodeDescription("n", NodeConfig(long_hold=0.0, max_hold=30.0), 1, 2)
    for version in (7, 8, 9):
        old = for_version(Reply(3, described), version)
        assert isinstance(old, Reply)
        assert old.value == NodeDescription("n", NodeConfig(max_hold=30.0), 1, 2)
        assert len(wire_of(old)[2][2]) == 11  # the layout that peer knows
    older = for_version(Reply(3, described), 6)
    assert isinstance(older, Reply)
    assert older.value == NodeDescription("n", NodeConfig(), 1, 2)
    alone = NodeDescription("n", NodeConfig(long_hold=5.0), 1, 2)
    old = for_version(Reply(3, alone), 9)
    assert isinstance(old, Reply)
    assert len(wire_of(old)[2][2]) == 9  # (nothing trailing set: version 5's layout)
    assert for_version(Reply(3, described), 10) == Reply(3, described)
    assert for_version(Reply(3, described), None) == Reply(3, described)


def test_a_chain_link_waits_elsewhere_since_version_10() -> None:
    elsewhere = (WhyWait("back-office", "ledger", 1),)
    report = WhyReport(
        "shop",
        "orders",
        chain=(WhyLink("shop", "orders", 3, ("cart",), elsewhere), WhyLink("shop", "cart", 4)),
    )
    links = wire_of(Reply(3, report))[2][5]
    assert links == [
        ["shop", "orders", 3, ["cart"], [["back-office", "ledger", 1]]],
        ["shop", "cart", 4, []],
    ]  # fmt: skip  (empty: not sent)
    assert message_of(wire_of(Reply(3, report))) == Reply(3, report)
    old = for_version(Reply(3, report), 9)
    assert isinstance(old, Reply)
    assert isinstance(old.value, WhyReport)
    assert old.value.chain == (WhyLink("shop", "orders", 3, ("cart",)), WhyLink("shop", "cart", 4))
    assert [len(link) for link in wire_of(old)[2][5]] == [4, 4]  # (version 9's layout)
    assert for_version(Reply(3, report), 10) == Reply(3, report)


# -- the one-entry memo of each record ------------------------------------------------------


def test_a_value_encoded_again_encodes_the_same_and_others_are_not_confused() -> None:
    """Same object, same bytes (the memo); an equal twin or another object never differs."""
    samples = sample_messages()
    first = [wire_of(message) for message in samples]
    assert [wire_of(message) for message in samples for _ in range(2)][::2] == first
    for message, wire in zip(samples + samples[::-1], first + first[::-1], strict=True):
        twin = type(message)(*(getattr(message, f) for f in message.__dataclass_fields__))
        assert wire_of(twin) == wire_of(message) == wire


def test_a_description_pushed_to_many_watchers_is_converted_once() -> None:
    described = SemaphoreDescription("m", 1, 1, b"", True, (OwnerInfo(1, 1, b"d", 9),), ())
    record = EFFECT.by_type[WatchFired].fields[3][1]
    assert isinstance(record, Optional)
    assert isinstance(record.inner, Record)
    dump = record.inner.to_wire
    assert dump(described) is dump(described)  # the same Struct: converted once
    other = SemaphoreDescription("n", 1, 0, b"", True)
    assert dump(other) is not dump(described)
    assert wire_of(Push(WatchFired(1, 2, "m", described))) == wire_of(
        Push(WatchFired(1, 2, "m", dataclasses.replace(described)))
    )


@pytest.mark.parametrize(
    ("command", "sent"),
    [
        (Acquire(1, "s", 1, 2), 10),
        (Acquire(1, "s", 1, 2, keep_place=True), 11),
        (AttachSession(1, b"k", 3), 4),
        (AttachSession(1, b"k", 3, timeout=2.0), 5),
        (AttachSession(1, b"k", 3, description="d"), 6),
    ],
)
def test_fields_gained_within_version_3_are_not_sent_at_their_defaults(
    command: Any, sent: int
) -> None:
    # So tenure's own client sends what it always did, and a server from before
    # them reads it (docs/protocol.md, section 14); both lengths load.
    wire = msgspec.msgpack.decode(encode_command(command))
    assert len(wire) == sent
    assert decode_command(encode_command(command)) == command


@pytest.mark.parametrize(
    "command",
    [
        CreateSession("n", b"key-in-clear", None),
        AttachSession(7, b"key-in-clear", 0, None),
        ResumeSession(7, b"key-in-clear", "n"),
        AdoptHold(7, "job", 8, 1, 41, b"key-in-clear", 2),
    ],
    ids=lambda command: type(command).__name__,
)
def test_a_credential_of_the_wrong_type_is_never_echoed(command: object) -> None:
    # Issue 58, D9: a protection key or a hand-off's secret sent as a string (msgpack
    # str, not bin) was named in clear in the error, which the server logs and says in
    # its GoingAway reason; the error names the type it got, never the value.
    body = wire_of(Request(1, command))  # type: ignore[arg-type]
    [site] = [i for i, value in enumerate(body[2]) if value == b"key-in-clear"]
    body[2][site] = "key-in-clear"
    with pytest.raises(ProtocolError) as caught:
        message_of(body)
    assert "key-in-clear" not in str(caught.value)
    assert "got str (its value is not shown: a credential)" in str(caught.value)
