"""Protocol version 3: Welcome's role and leader, ClusterStatus and ClusterView, NOT_LEADER."""

from __future__ import annotations

import dataclasses

import pytest

from tenure._core import (
    AcquireAll,
    AdoptHold,
    ClaimName,
    ListNodes,
    OfferHold,
    ReleaseClaim,
    ReserveUnits,
    SwapSemaphoreData,
    TopNames,
    WatchPrefix,
    WhyName,
)
from tenure._protocol import (
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    GoingAway,
    Hello,
    Refused,
    Reply,
    Request,
    Welcome,
)
from tenure._protocol.admin import ReadBackup, ReloadFiles
from tenure._protocol.cluster import ClusterStatus, ClusterView, MemberView
from tenure._protocol.messages import (
    LEADER,
    SINCE_VERSION_2,
    SINCE_VERSION_3,
    SINCE_VERSION_4,
    SINCE_VERSION_5,
    SINCE_VERSION_6,
    SINCE_VERSION_7,
    SINCE_VERSION_8,
    SINCE_VERSION_9,
    STANDALONE,
    STANDBY,
)
from tenure._protocol.older_peers import for_version
from tenure._protocol.payloads import reply_fits
from tenure.errors import (
    ErrorCode,
    NotLeaderError,
    ProtocolError,
    UnavailableError,
    error_from_code,
    leader_named,
)
from tests.protocol.helpers import ConnectionPair, body_of, message_of, raw_frame, wire_of

STANDBY_WELCOME = Welcome(
    server_name="t2", instance_id=b"i" * 16, idle_timeout=15.0, role=STANDBY, leader="t3:6390"
)
VIEW = ClusterView(
    cluster="c1",
    leader="t3",
    term=7,
    index=120,
    answered_by="t2",
    members=(
        MemberView("t2", STANDBY, "t2:6389", 118, age=0.5),
        MemberView("t3", LEADER, "t3:6390", 120, age=None, http="t3:8080", ydb="t3:2136"),
    ),
)


def test_version_13_is_spoken_and_the_older_ones_still_are() -> None:
    assert PROTOCOL_VERSION == 13  # (watches on standbys: no layout changed)
    assert {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13} == SUPPORTED_VERSIONS
    assert {ClusterStatus} == SINCE_VERSION_3
    assert {SwapSemaphoreData} == SINCE_VERSION_4
    assert not SINCE_VERSION_3 & SINCE_VERSION_2
    assert not SINCE_VERSION_4 & (SINCE_VERSION_2 | SINCE_VERSION_3)
    assert {ReserveUnits, AcquireAll} == SINCE_VERSION_5
    assert {WatchPrefix, ClaimName, ReleaseClaim} == SINCE_VERSION_6
    assert {OfferHold, AdoptHold} == SINCE_VERSION_7
    assert {ReadBackup, ReloadFiles} == SINCE_VERSION_8
    assert {WhyName, TopNames} == SINCE_VERSION_9
    assert ListNodes in SINCE_VERSION_2


def test_a_version_3_welcome_carries_the_role_and_the_leader() -> None:
    pair = ConnectionPair()
    assert pair.send(pair.client, Hello(client_name="c")) == [Hello(client_name="c")]
    data = pair.server.send(STANDBY_WELCOME)
    assert body_of(data) == [
        11,
        PROTOCOL_VERSION,
        "t2",
        b"i" * 16,
        1048576,
        15.0,
        "standby",
        "t3:6390",
    ]
    pair.client.receive_data(data)
    assert pair.client.next_event() == STANDBY_WELCOME


def test_a_version_3_peer_still_receives_the_role_and_the_leader() -> None:
    # Versions 4 to 10 changed no layout: a version-3 client reads the Welcome of version 3.
    pair = ConnectionPair()
    pair.send(pair.client, Hello(version=3))
    welcome = Welcome(version=3, server_name="t2", role=STANDBY, leader="t3:6390")
    data = pair.server.send(welcome)
    assert body_of(data) == [11, 3, "t2", b"", 1048576, 0.0, "standby", "t3:6390"]
    pair.client.receive_data(data)
    assert pair.client.next_event() == welcome
    assert for_version(welcome, 3) is welcome


def test_a_welcome_at_its_defaults_travels_in_the_older_layout() -> None:
    # A standalone server's Welcome is byte for byte what version 2 sent.
    assert wire_of(Welcome(server_name="s")) == [11, PROTOCOL_VERSION, "s", b"", 1048576, 0.0]
    assert message_of([11, PROTOCOL_VERSION, "s", b"", 1048576, 0.0]) == Welcome(server_name="s")
    leader = Welcome(role=LEADER)  # a leader names nobody else: leader left out
    assert wire_of(leader)[6:] == ["leader"]
    assert message_of(wire_of(leader)) == leader


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_peer_receives_welcome_without_role_and_leader(version: int) -> None:
    pair = ConnectionPair()
    pair.send(pair.client, Hello(version=version))
    data = pair.server.send(
        Welcome(version=version, server_name="t2", role=STANDBY, leader="t3:6390")
    )
    assert body_of(data) == [11, version, "t2", b"", 1048576, 0.0]  # its version's layout
    pair.client.receive_data(data)
    welcome = pair.client.next_event()
    assert isinstance(welcome, Welcome)
    assert (welcome.role, welcome.leader) == (STANDALONE, None)
    assert for_version(STANDBY_WELCOME, 2) == Welcome(
        server_name="t2", instance_id=b"i" * 16, idle_timeout=15.0
    )
    assert for_version(STANDBY_WELCOME, 3) is STANDBY_WELCOME


def test_a_welcome_with_a_field_too_many_is_refused() -> None:
    with pytest.raises(ProtocolError, match="Welcome has 5 to 9 fields, got 10"):
        message_of([11, 3, "s", b"", 1048576, 0.0, "standby", "h:1", False, "c", "extra"])


def test_a_server_without_deadlock_detection_says_so_to_a_version_6_client_only() -> None:
    # Since version 6, after role and leader; not sent when true (the default).
    off = Welcome(server_name="s", deadlock_detection=False)
    assert wire_of(off) == [11, PROTOCOL_VERSION, "s", b"", 1048576, 0.0, "", None, False]
    assert message_of(wire_of(off)) == off
    assert wire_of(Welcome(server_name="s", role=LEADER))[6:] == ["leader"]
    # An older client sends no asking task, so nothing is detected for it anyway: it
    # reads its version's layout.
    assert for_version(off, 6) is off
    assert for_version(off, 5) == Welcome(server_name="s")
    assert wire_of(for_version(dataclasses.replace(off, version=5), 5)) == [
        11, 5, "s", b"", 1048576, 0.0
    ]  # fmt: skip


def test_cluster_status_and_its_view_have_their_layouts() -> None:
    assert wire_of(Request(5, ClusterStatus())) == [2, 5, [30]]
    assert message_of([2, 5, [30]]) == Request(5, ClusterStatus())
    assert wire_of(Reply(5, VIEW)) == [
        13,
        5,
        [
            9,
            "c1",
            "t3",
            7,
            120,
            "t2",
            [
                ["t2", "standby", "t2:6389", 118, 0.5, "", ""],
                ["t3", "leader", "t3:6390", 120, None, "t3:8080", "t3:2136"],
            ],
        ],
    ]
    assert message_of(wire_of(Reply(5, VIEW))) == Reply(5, VIEW)


def test_cluster_status_is_answered_by_a_view_and_nothing_else() -> None:
    assert reply_fits(ClusterStatus, VIEW)
    assert not reply_fits(ClusterStatus, None)
    pair = ConnectionPair()
    pair.handshake()
    pair.send(pair.client, Request(1, ClusterStatus()))
    assert pair.send(pair.server, Reply(1, VIEW)) == [Reply(1, VIEW)]
    pair.send(pair.client, Request(2, ClusterStatus()))
    pair.client.receive_data(raw_frame(Reply(2, True)))
    with pytest.raises(ProtocolError, match="ClusterStatus"):
        pair.client.next_event()


def test_not_leader_is_code_43_and_names_the_leader() -> None:
    assert int(ErrorCode.NOT_LEADER) == 43
    error = error_from_code(ErrorCode.NOT_LEADER, "leader=t3:6390 (this server is a standby)")
    assert isinstance(error, NotLeaderError)
    assert isinstance(error, UnavailableError)
    assert error.leader == "t3:6390"
    assert leader_named("t2:6389 refused: leader=[::1]:6390 (a standby)") == "[::1]:6390"
    assert leader_named("leader= (stepped down)") is None
    assert leader_named("no leader named here") is None
    assert NotLeaderError.pointing_to(None, "why").leader is None
    assert str(NotLeaderError.pointing_to("h:1", "why")) == "leader=h:1 (why)"


def test_not_leader_travels_in_refused_and_going_away() -> None:
    refused = Refused(ErrorCode.NOT_LEADER, "leader=t3:6390 (this server is a standby)")
    assert wire_of(refused) == [12, 43, "leader=t3:6390 (this server is a standby)"]
    assert message_of(wire_of(refused)) == refused
    going = GoingAway(ErrorCode.NOT_LEADER, "leader= (stepped down)")
    assert wire_of(going) == [17, 43, "leader= (stepped down)"]
    assert message_of(wire_of(going)) == going
