"""Sync groups and partitions: members seen by a blocking watch, ``with`` leaves, and a
partition's assignment from threads."""

from __future__ import annotations

import threading

import pytest

import tenure.sync
from tenure.errors import (
    AlreadyExistsError,
    LeaseLostError,
    LimitExceededError,
    PreconditionFailedError,
)


def test_members_join_update_and_leave_seen_by_a_blocking_watch(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    group = session.group("workers")
    assert isinstance(group, tenure.sync.Group)
    me = group.join("worker-1", data=b"10.0.0.5:8080")
    assert isinstance(me, tenure.sync.GroupMember)
    assert (me.id, me.data, me.group, me.weight) == ("worker-1", b"10.0.0.5:8080", "workers", None)
    with pytest.raises(AlreadyExistsError):
        other.group("workers").join("worker-1")
    seen: list[tenure.GroupView] = []
    with group.watch() as views:
        seen.append(next(views))
        with other.group("workers").join("worker-2"):
            seen.append(next(views))
            me.update(b"10.0.0.5:9090")
            seen.append(next(views))
        seen.append(next(views))
    assert [view.members for view in seen] == [
        {"worker-1": b"10.0.0.5:8080"},
        {"worker-1": b"10.0.0.5:8080", "worker-2": b""},
        {"worker-1": b"10.0.0.5:9090", "worker-2": b""},
        {"worker-1": b"10.0.0.5:9090"},
    ]
    assert [(view.joined, view.left) for view in seen] == [
        ({"worker-1"}, set()),
        ({"worker-2"}, set()),
        (set(), set()),
        (set(), {"worker-2"}),
    ]
    assert me.data == b"10.0.0.5:9090"
    me.leave()
    assert me.lost.is_set()
    assert me.lost_reason is None
    assert group.members() == {}
    with pytest.raises(PreconditionFailedError):
        me.update(b"x")


def test_a_group_nobody_made_has_no_members_also_after_a_refused_join(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    assert session.group("nobody").members() == {}
    member = session.group("full", max_members=1).join("a", data=b"x")
    with pytest.raises(LimitExceededError, match="max_members"):
        other.group("full").join("b")
    assert other.group("full").members() == {"a": b"x"}
    member.leave()
    other.group("full").delete()
    assert other.group("full").members() == {}


def test_a_forced_delete_loses_the_member_and_leaving_with_raises_it(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    member = session.group("g").join("m")
    member.__enter__()
    other.group("g").delete(force=True)
    assert member.lost.wait(10)
    with pytest.raises(LeaseLostError):
        member.__exit__(None, None, None)


def test_a_partition_answers_from_its_view_in_any_thread(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    keys = [f"order-{i}" for i in range(200)]
    with session.group("shards").partition("a", weight=1) as a:
        assert isinstance(a, tenure.sync.Partition)
        assert all(a.owns(key) for key in keys)
        changes = a.changes()
        first = next(changes)
        assert (first.weights, first.joined) == ({"a": 1}, {"a"})
        b = other.group("shards").partition("b", weight=1)
        view = next(changes)
        assert (set(view.weights), view.joined) == ({"a", "b"}, {"b"})
        owned: dict[str, list[str]] = {}

        def count(part: tenure.sync.Partition) -> None:
            owned[part.id] = [key for key in keys if part.owns(key)]

        threads = [threading.Thread(target=count, args=(part,)) for part in (a, b)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(owned["a"] + owned["b"]) == sorted(keys)
        assert owned["a"]
        assert owned["b"]
        assert a.owners(keys[0], replicas=2) == b.owners(keys[0], replicas=2)
        assert (a.view.weights, a.member.id, a.weight, b.token > a.token) == (
            {"a": 1, "b": 1},
            "a",
            1,
            True,
        )
        b.leave()
        assert next(changes).left == {"b"}
        changes.close()
    assert not a.held
    with pytest.raises(PreconditionFailedError):
        a.owns("k")
    assert session.group("shards").members() == {}
