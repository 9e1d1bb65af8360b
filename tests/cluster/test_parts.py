"""The cluster's pure parts: entries cut at record boundaries, keys, the lease's
deadline, what a member tells of the cluster, the settings and what a member
advertises (unit tier: nothing is started)."""

from __future__ import annotations

import argparse

import msgspec
import pytest

from tenure._protocol.cluster import ClusterView
from tenure.errors import ConfigError, NotLeaderError, leader_named
from tenure.server._cluster import advertised
from tenure.server._cluster.appender import _chunks
from tenure.server._cluster.keys import (
    FIELD_FACES,
    ClusterDataError,
    ClusterKeys,
    LogEntry,
    Pointer,
    ServerRecord,
    decode_entry,
    decode_member,
    decode_pointer,
    encode,
)
from tenure.server._cluster.lease import DRIFT, MARGIN, MemberLease
from tenure.server._cluster.role import ClusterRole
from tenure.server._cluster.store import Leader
from tenure.server._config.cluster_url import parse_cluster_url, without_secrets
from tenure.server._config.serve_config import ServeConfig, add_arguments, resolve
from tenure.server._durability.storage import framed, unframed
from tenure.server._faces import settings


def _records(*sizes: int) -> bytes:
    return b"".join(framed(bytes([n % 251 + 1]) * size) for n, size in enumerate(sizes))


def test_entries_are_cut_between_records_and_keep_every_record_whole() -> None:
    data = _records(100, 200, 300, 50, 400, 10)
    chunks = _chunks(data, 500)
    assert b"".join(chunks) == data
    assert all(len(chunk) <= 500 for chunk in chunks)
    assert len(chunks) > 1
    for chunk in chunks:
        unframed(chunk)  # each chunk is whole records (raises otherwise)


def test_a_batch_within_the_limit_is_one_entry_and_nothing_is_none() -> None:
    data = _records(10, 20)
    assert _chunks(data, 1000) == [data]
    assert _chunks(b"", 1000) == []


def test_a_record_larger_than_an_entry_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="--cluster-max-entry"):
        _chunks(_records(10, 2000, 10), 500)


def test_damaged_records_are_refused() -> None:
    data = bytearray(_records(10, 20))
    data[-1] ^= 0xFF
    with pytest.raises(ValueError, match="checksum"):
        unframed(bytes(data))
    with pytest.raises(ValueError, match=r"cut short|does not fit"):
        unframed(_records(10)[:-3])


def test_keys_sort_as_indexes_and_clusters_do_not_share_keys() -> None:
    keys = ClusterKeys.of("/tenure/", "prod")
    assert keys.entry(9) < keys.entry(10) < keys.entry(10**15)
    assert keys.index_of(keys.entry(1234)) == 1234
    assert keys.entry(1).startswith(keys.log)
    other = ClusterKeys.of("/tenure/", "prod2")
    assert not other.root.startswith(keys.root)
    assert not keys.root.startswith(other.root)
    assert keys.root.startswith(b"/tenure/c/")  # beside the etcd:// backend's n/


def test_values_round_trip_and_foreign_ones_are_corrupt_data() -> None:
    entry = LogEntry(7, b"records")
    assert decode_entry(encode(entry)) == entry
    pointer = Pointer(10, 7, 3, 300, 12345)
    assert decode_pointer(encode(pointer)) == pointer
    faces = {"ydb": "h:3", "dflockd": "h:1", "another": "h:4"}
    member = ServerRecord("a", "h:1", "leader", 5, 1.5, "h:2", faces=faces, shift=2.5)
    assert decode_member(encode(member)) == member
    with pytest.raises(ClusterDataError, match="unreadable log entry"):
        decode_entry(b"\x81\xa1x\x01")


class FirstLayoutMember(msgspec.Struct, array_like=True, frozen=True):
    """A member's record as the first layout stored it (before the face registry):
    two faces' addresses in fields of their own, no other face."""

    name: str
    address: str
    role: str = ""
    applied: int = 0
    written: float = 0.0
    http: str = ""
    ydb: str = ""
    dflockd: str = ""
    shift: float = 0.0


def test_members_of_either_layout_read_each_other_s_records() -> None:
    """A record of the first layout reads as the same member, and one written now
    reads, to a member of the first layout, with the two faces where it kept them (a
    face it did not know is what it leaves unread)."""
    old = FirstLayoutMember("a", "h:1", "leader", 5, 1.5, "h:2", "h:3", "h:1", 2.5)
    read = decode_member(msgspec.msgpack.encode(old))
    assert read == ServerRecord(
        "a", "h:1", "leader", 5, 1.5, "h:2", faces={"ydb": "h:3", "dflockd": "h:1"}, shift=2.5
    )
    no_ydb = FirstLayoutMember("b", "h:5", dflockd="h:5")
    assert decode_member(msgspec.msgpack.encode(no_ydb)).faces == {"dflockd": "h:5"}
    now = ServerRecord(
        "a", "h:1", "leader", 5, 1.5, "h:2", faces={**read.faces, "x": "h:9"}, shift=2.5
    )
    assert msgspec.msgpack.decode(encode(now), type=FirstLayoutMember) == old
    assert FIELD_FACES == ("ydb", "dflockd")  # (stored data: this never changes)


def test_the_lease_deadline_counts_from_the_last_renewal_sent_and_ends_when_lost() -> None:
    lease = MemberLease(1, 10, granted_at=100.0)
    assert lease.deadline() == pytest.approx(100.0 + 10 * (1 - DRIFT) - MARGIN)
    lease.renewed(103.0)
    lease.renewed(101.0)  # an older answer never moves it back
    assert lease.deadline() == pytest.approx(103.0 + 10 * (1 - DRIFT) - MARGIN)
    lease.lease_gone()
    assert lease.deadline() == float("-inf")


def test_a_standby_names_the_leader_for_each_face_and_the_status_holds_every_member() -> None:
    me = ServerRecord("b", "h:2", http="h:12")
    role = ClusterRole("prod", me)
    assert role.leader() is None  # nobody leads yet
    leader = ServerRecord(
        "a", "h:1", "leader", 9, 0.0, "h:11", faces={"ydb": "h:21", "dflockd": "h:1"}
    )
    role.saw(Leader(leader, term=42, lease=7))
    role.members = [leader]
    role.applied = lambda: 8
    assert (role.leader(), role.leader("http"), role.leader("ydb")) == ("h:1", "h:11", "h:21")
    assert (role.leader("dflockd"), role.leader("another")) == ("h:1", None)
    view = role.status()
    assert isinstance(view, ClusterView)
    assert (view.leader, view.term, view.index, view.answered_by) == ("a", 42, 9, "b")
    assert [(m.name, m.role, m.applied, m.ydb) for m in view.members] == [
        ("a", "leader", 9, "h:21"),
        ("b", "standby", 8, ""),
    ]
    role.saw(Leader(leader, term=50, lease=8))
    assert role.leader_changes == 1


def test_not_leader_errors_name_the_leader_in_the_form_clients_read() -> None:
    error = NotLeaderError.pointing_to("h:1", "this server is a standby")
    assert error.leader == "h:1"
    assert leader_named(f"10.0.0.1:6388 refused: {error}") == "h:1"
    assert NotLeaderError.pointing_to(None, "no leader").leader is None


def _config(*flags: str) -> ServeConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser, settings())
    return resolve(parser.parse_args(list(flags)), {}, settings())


def test_cluster_urls_name_the_cluster_and_hide_passwords() -> None:
    url = parse_cluster_url("etcd://a:2379,b:2380/prod?prefix=/x/&user=u&password=p")
    assert (url.name, url.prefix, url.connection.endpoints) == ("prod", "/x/", ("a:2379", "b:2380"))
    assert without_secrets("etcd://a/prod?user=u&password=s3cret") == (
        "etcd://a/prod?user=u&password=***"
    )
    for bad, why in (
        ("etcd://a:2379", "names the cluster"),
        ("redis://a/prod", "expected etcd://"),
        ("etcd://a/has space", "cluster name"),
        ("etcd://a/prod?colour=red", "colour"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_cluster_url(bad)


def test_cluster_settings_are_checked_when_read() -> None:
    assert _config("--cluster", "etcd://a/prod").cluster_lease_ttl == 5
    with pytest.raises(ConfigError, match="--max-frame-size"):
        _config("--cluster", "etcd://a/prod", "--cluster-max-entry", "70000")
    with pytest.raises(ConfigError, match="--advertise"):
        _config("--cluster", "etcd://a/prod", "--host", "0.0.0.0")
    with pytest.raises(ConfigError, match="HOST:PORT"):
        _config("--cluster", "etcd://a/prod", "--advertise", "nohost")
    with pytest.raises(ConfigError, match="cluster-lease-ttl"):
        _config("--cluster", "etcd://a/prod", "--cluster-lease-ttl", "1")
    with pytest.raises(ConfigError, match=r"password=\*\*\*"):
        _config("--cluster", "etcd://a?password=secret")
    assert "secret" not in str(
        _config("--cluster", "etcd://a/p?user=u&password=secret").fields()["cluster"]
    )


def test_a_member_advertises_each_face_where_its_clients_reach_it() -> None:
    plain = _config("--cluster", "etcd://a/prod", "--host", "10.0.0.5")
    member = advertised(plain, 6388)
    assert (member.name, member.address, member.http, member.faces) == (
        "10.0.0.5:6388",
        "10.0.0.5:6388",
        "",
        {"dflockd": "10.0.0.5:6388"},  # dflockd's clients share the main port; no YDB
    )
    faces = _config(
        "--cluster",
        "etcd://a/prod",
        "--host",
        "0.0.0.0",
        "--advertise",
        "t1.example:7000",
        "--member-name",
        "t1",
        "--http-port",
        "8080",
        "--dflockd-port",
        "7001",
        "--ydb-port",
        "2136",
    )
    member = advertised(faces, 6388)
    assert (member.name, member.address, member.http, member.faces) == (
        "t1",
        "t1.example:7000",
        "t1.example:8080",
        {"dflockd": "t1.example:7001", "ydb": "t1.example:2136"},
    )


def test_a_standby_shows_times_with_the_leaders_clock_once_it_has_read_its_record() -> None:
    role = ClusterRole("prod", ServerRecord("b", "h:2"))
    leader = ServerRecord("a", "h:1", "leader", shift=1_700_000_000.5)
    assert role.leader_shift is None  # no leader known
    role.saw(Leader(ServerRecord("a", "h:1"), term=3, lease=1))
    assert role.leader_shift is None  # its record not read yet
    role.members = [leader, ServerRecord("b", "h:2", shift=123.0)]
    assert role.leader_shift == 1_700_000_000.5
    role.lead(9)
    assert (role.term, role.status().term) == (9, 9)  # a new leader says its own term at once
