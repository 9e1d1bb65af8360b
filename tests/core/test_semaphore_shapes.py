"""The compact shapes of a semaphore's owners and waiters, and of a session's sets.

A semaphore keeps no container while at most one session holds it and nobody
waits; a session makes its waits and watches sets on first use. These tests pin
that the shapes change back and forth without changing what the engine does.
"""

from __future__ import annotations

import sys

from tenure._core import MAX_COUNT, Release, Renew
from tenure._core.quotas import Usage
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.semaphore_fields import SemaphoreRest
from tenure._core.snapshot import dump, load, resume
from tenure._core.values import check_count
from tests.compiled import compiled_build

from .support import NODE, acquire, create_semaphore, make_engine, open_session


def owner(sid: int, count: int, token: int) -> Owner:
    return Owner(sid, count, b"", token)


def test_one_owner_needs_no_dict_and_two_keep_grant_order() -> None:
    sem = Semaphore("s", 10, b"", ephemeral=False)
    assert sem.is_idle()
    assert sem.owners == {}
    assert sem.owner(1) is None
    sem.set_owner(owner(1, 2, 1))
    assert type(sem._owners) is Owner
    assert sem.count == 2
    sem.set_owner(owner(2, 3, 2))
    sem.set_owner(owner(3, 1, 3))
    assert list(sem.owners) == [1, 2, 3]
    assert sem.count == 6
    sem.set_owner(owner(1, 4, 4))  # an upgrade: a new grant goes to the back
    assert list(sem.owners) == [2, 3, 1]
    assert sem.count == 8
    sem.set_owner(owner(2, 1, 2))  # restated (same token): keeps its place
    assert list(sem.owners) == [2, 3, 1]
    assert sem.count == 6
    assert sem.remove_owner(3) is not None
    assert sem.remove_owner(2) is not None
    assert type(sem._owners) is Owner
    assert sem.owner(1) is not None
    assert sem.count == 4
    assert sem.remove_owner(2) is None
    assert sem.remove_owner(1) is not None
    assert sem._owners is None
    assert sem.count == 0
    assert sem.is_idle()


def test_waiters_dict_exists_only_while_someone_waits() -> None:
    sem = Semaphore("s", 1, b"", ephemeral=False)
    sem.set_owner(owner(1, 1, 1))
    assert sem._waiters is None
    assert sem.queue_length() == 0
    sem.enqueue(Waiter(2, 7, 1, b"", None, None))
    sem.enqueue(Waiter(3, 8, 1, b"", None, None))
    assert list(sem.waiters) == [2, 3]
    assert sem.waiter(3) is not None
    assert not sem.can_grant_now(4, 1, 0.0)
    sem.remove_owner(1)
    head = sem.head()
    assert head is not None
    assert head.session_id == 2
    assert sem.remove_waiter(2) is head
    assert sem.remove_waiter(3) is not None
    assert sem._waiters is None
    assert sem.waiters == {}


def test_the_views_are_read_only_and_empty_views_are_shared() -> None:
    sem = Semaphore("s", 1, b"", ephemeral=False)
    assert sem.owners is sem.waiters  # one shared empty
    assert not hasattr(sem.owners, "__setitem__")


def test_mutex_counts_share_one_int() -> None:
    big = int(str(MAX_COUNT))  # an equal but distinct object, as decoding makes
    assert big is not MAX_COUNT
    assert check_count(big) is MAX_COUNT
    engine = make_engine()
    sid = open_session(engine)
    acquire(engine, sid, "m", big, ephemeral=True)
    sem = engine.nodes["n"].semaphores["m"]
    assert sem.count is MAX_COUNT
    assert sem.owners[sid].count is MAX_COUNT


def test_session_sets_are_made_on_first_use_and_dropped_when_empty() -> None:
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "s", limit=1)
    session = engine.sessions[b]
    assert (session._holds, session._waits, session._watches) == (None, None, None)
    assert session.waits == session.held == set()
    acquire(engine, a, "s", 1)
    acquire(engine, b, "s", 1)  # queues
    assert session.waits == {"s"}
    engine.apply(Release(a, "s"), 0.0)  # b is granted: no longer waits
    assert session._waits is None
    assert session.held == {"s"}
    assert list(session.holds_on("s")) == [0]
    engine.apply(Release(b, "s"), 0.0)
    assert session._holds is None


def test_an_owner_keeps_its_key_and_derives_session_and_hold() -> None:
    plain = Owner(7, 1, b"", 3)
    assert (plain.session_id, plain.hold, plain.key) == (7, 0, 7)
    assert plain.session_id is plain.key  # hold 0: the key is the session id itself
    numbered = Owner(7, 1, b"", 4, hold=2)
    assert (numbered.session_id, numbered.hold, numbered.key) == (7, 2, 7 | 2 << 64)
    big = Owner(2**64 - 1, 1, b"", 5, hold=3)
    assert (big.session_id, big.hold) == (2**64 - 1, 3)


def test_an_owner_without_data_or_a_lease_keeps_no_rest() -> None:
    owner = Owner(1, 1, b"", 1)
    assert owner._rest is None
    assert (owner.lease_ttl, owner.lease_deadline, owner.data) == (None, None, b"")
    assert not owner.leased
    with_data = Owner(1, 1, b"d", 1)
    assert with_data._rest is not None
    assert (with_data.data, with_data.leased) == (b"d", False)
    leased = Owner(1, 1, b"", 2, 5.0, 15.0)
    lease = leased._rest
    assert (leased.lease_ttl, leased.lease_deadline, leased.leased) == (5.0, 15.0, True)
    leased.lease_ttl, leased.lease_deadline = 8.0, 20.0  # what a renewal does
    assert leased._rest is lease
    assert (leased.lease_ttl, leased.lease_deadline) == (8.0, 20.0)
    assert Owner(1, 1, b"", 2, 8.0, 20.0) == leased
    assert Owner(1, 1, b"", 2, 8.0, 21.0) != leased
    assert "lease_ttl=8.0" in repr(leased)


def kept(sem: Semaphore) -> bool:
    """Whether ``sem`` keeps a SemaphoreRest (else: an ephemeral mutex's defaults)."""
    return isinstance(sem._rest, SemaphoreRest)


def test_an_ephemeral_mutex_keeps_no_rest_until_it_differs() -> None:
    sem = Semaphore("m", MAX_COUNT, b"", ephemeral=True)
    assert not kept(sem)
    assert (sem.limit, sem.data, sem.ephemeral, sem.blocked_until) == (MAX_COUNT, b"", True, 0.0)
    sem.set_owner(owner(1, MAX_COUNT, 1))
    sem.enqueue(Waiter(2, 1, MAX_COUNT, b"", None, None))
    assert kept(sem)
    assert list(sem.waiters) == [2]
    sem.remove_waiter(2)
    assert not kept(sem)  # the queue emptied: the defaults again
    sem.blocked_until = 5.0
    assert (kept(sem), sem.blocked_until) == (True, 5.0)
    sem.blocked_until = 0.0
    assert not kept(sem)
    sem.set_data(b"x")
    assert (kept(sem), sem.data) == (True, b"x")
    created = Semaphore("s", 3, b"", ephemeral=False)
    assert (kept(created), created.limit, created.ephemeral) == (True, 3, False)


def test_a_held_mutex_keeps_its_usage_in_place_of_a_rest_and_its_count_in_its_owner() -> None:
    usage = Usage("alice")
    sem = Semaphore("m", MAX_COUNT, b"", ephemeral=True, usage=usage)
    assert (sem._rest is usage, sem.usage is usage, sem.count) == (True, True, 0)
    sem.set_owner(owner(1, MAX_COUNT, 1))
    assert (kept(sem), sem.count, sem.usage is usage) == (False, MAX_COUNT, True)
    other = Usage("bob")
    sem.usage = other  # (a claim's hand-over, a snapshot's owners: no rest made)
    assert (kept(sem), sem.usage is other) == (False, True)
    sem.blocked_until = 3.0  # a rest made now keeps the usage...
    assert (kept(sem), sem.usage is other) == (True, True)
    sem.usage = usage
    sem.blocked_until = 0.0  # ...and gives it back when it goes
    assert (sem._rest is usage, sem.count) == (True, MAX_COUNT)


def test_two_owners_keep_their_sum_in_a_rest_given_back_at_one() -> None:
    usage = Usage("alice")
    sem = Semaphore("r", MAX_COUNT, b"", ephemeral=True, usage=usage)
    sem.set_owner(owner(1, 1, 1))
    sem.set_owner(owner(2, 1, 2))  # two readers of a reader-writer lock, say
    assert (kept(sem), sem.count, sem.usage is usage) == (True, 2, True)
    sem.set_owner(owner(3, 5, 3))
    sem.set_owner(owner(2, 4, 4))  # an upgrade: its old count leaves the sum
    assert (sem.count, list(sem.owners)) == (10, [1, 3, 2])
    assert not sem.can_grant_now(9, MAX_COUNT - 9, 0.0)
    assert sem.can_grant_now(9, MAX_COUNT - 10, 0.0)
    assert sem.remove_owner(3) is not None
    assert (kept(sem), sem.count) == (True, 5)
    assert sem.remove_owner(1) is not None  # one owner again: the defaults, no rest
    assert (sem._rest is usage, sem.count, list(sem.owners)) == (True, 4, [2])
    assert sem.remove_owner(2) is not None
    assert (sem._rest is usage, sem.count, sem.is_idle()) == (True, 0, True)


def test_a_held_mutex_is_three_fields() -> None:
    """What a million held mutexes cost: a semaphore is three pointers besides its
    object's header (64 bytes compiled, 56 pure; five fields took 80 and 72)."""
    sem = Semaphore("m", MAX_COUNT, b"", ephemeral=True, usage=Usage("alice"))
    sem.set_owner(owner(1, MAX_COUNT, 1))
    assert sys.getsizeof(sem) <= (64 if compiled_build() else 56)


def test_renewing_through_the_engine_restarts_the_same_grant() -> None:
    engine = make_engine()
    sid = open_session(engine)
    token = acquire(engine, sid, "m", ephemeral=True, lease_ttl=5.0).token
    owner = engine.nodes[NODE].semaphores["m"].owner(sid)
    assert owner is not None
    assert owner.lease_deadline is not None
    engine.apply(Renew(sid, "m", lease_ttl=9.0), 2.0)
    assert (owner.token, owner.lease_ttl, owner.lease_deadline) == (token, 9.0, 11.0)


def test_grants_of_one_instant_share_one_since_float() -> None:
    engine = make_engine()
    sid = open_session(engine)
    instant = 1000.0
    # Equal times in distinct float objects, as a server's clock hands them out.
    first, second = float("1000.0"), float("1e3")
    assert first is not second
    acquire(engine, sid, "a", ephemeral=True, now=instant)
    acquire(engine, sid, "b", ephemeral=True, now=first)
    acquire(engine, sid, "c", ephemeral=True, now=second)
    acquire(engine, sid, "d", ephemeral=True, now=1001.0)
    owners = {name: engine.nodes[NODE].semaphores[name].owner(sid) for name in "abcd"}
    since = {name: o.since for name, o in owners.items() if o is not None}
    assert since == {"a": 1000.0, "b": 1000.0, "c": 1000.0, "d": 1001.0}
    # Shared to save memory in the pure build; a compiled Owner keeps ``since`` unboxed
    # in its own slot (8 bytes, no float object), so there is nothing to share.
    if not compiled_build():
        assert since["a"] is since["b"] is since["c"]

    restored = load(dump(engine))
    resume(restored, 5000.0)
    moved = [restored.nodes[NODE].semaphores[name].owner(sid) for name in "abcd"]
    times = [o.since for o in moved if o is not None]
    assert times == [1000.0 + 4000.0 - 1.0] * 3 + [5000.0]
    if not compiled_build():
        assert times[0] is times[1] is times[2]


def test_timed_says_whether_a_semaphore_has_any_deadline() -> None:
    sem = Semaphore("s", 3, b"", ephemeral=False)
    assert not sem.timed()
    sem.set_owner(owner(1, 1, 1))
    assert not sem.timed()  # a hold without a lease lasts as long as its session
    sem.set_owner(owner(2, 1, 2))
    assert not sem.timed()
    sem.set_owner(Owner(3, 1, b"", 3, 5.0, 10.0))  # one leased hold among three
    assert sem.timed()
    assert sem.remove_owner(3) is not None
    assert not sem.timed()
    sem.enqueue(Waiter(4, 7, 3, b"", None, None))  # queued, even without a timeout
    assert sem.timed()
    assert sem.remove_waiter(4) is not None
    sem.blocked_until = 2.0  # lock-delay
    assert sem.timed()
    alone = Semaphore("m", MAX_COUNT, b"", ephemeral=True)
    alone.set_owner(Owner(1, MAX_COUNT, b"", 9, 1.0, 2.0))
    assert alone.timed()


def test_a_hold_keeps_its_sessions_own_id_object() -> None:
    engine = make_engine()
    for _ in range(300):  # ids above 256: ints Python does not share by itself
        sid = open_session(engine)
    decoded = int(str(sid))  # as a request off the wire brings it: equal, not the same
    assert decoded is not sid
    acquire(engine, decoded, "m", ephemeral=True)
    owner = engine.nodes[NODE].semaphores["m"].owner(sid)
    assert owner is not None
    assert owner.key == engine.sessions[sid].session_id
    if not compiled_build():  # a compiled Owner keeps its key unboxed: see above
        assert owner.key is engine.sessions[sid].session_id
    restored = load(dump(engine))
    again = restored.nodes[NODE].semaphores["m"].owner(sid)
    assert again is not None
    assert again.key == restored.sessions[sid].session_id
    if not compiled_build():
        assert again.key is restored.sessions[sid].session_id
