"""Engine snapshots, and resuming an engine in a new process.

:func:`dump` turns the engine's state into plain data (dicts, lists, str, bytes,
int, float, bool, None: msgpack and the like carry it as it is); :func:`load`
builds an equal engine from it. Watches are not part of a snapshot: they belong
to connections, and a client re-arms them (reading the latest state) when it
re-attaches.

Times inside an engine are on its host's monotonic clock, which starts afresh in a
new process. :func:`resume` moves a loaded engine onto the new clock, keeping the
promises a restart must keep:

* the fencing counter continues (rule 3: tokens never repeat or go backwards);
* every session gets a fresh recovery window from the restart, detached until its
  client re-attaches (nobody's session ends because the server was down);
* every lease TTL starts afresh (a holder could not renew while the server was down);
* acquire timeouts, lock-delays and claims keep the time they had left (a claim's
  ``at_least`` and its end both move by the downtime, as a lock-delay's end does);
* sessions' creation times and owners' and waiters' since-times move with the
  clock, as if no time passed while the server was down (a monotonic clock cannot
  tell how long that was), so an age shown after a restart leaves the downtime out.

Layout (version 4): a server restarts by loading one of these, so it is made to
load fast. Sessions, and each node's semaphores, owners and waiters, are *flat*
lists of fields (``SESSION_FIELDS`` values per session, and so on), rather than a
list or dict per object: msgpack then makes no container per lock, and loading
walks each list once. A semaphore's fields end with how many of the owners and
waiters lists that follow are its own. ``missed`` holds what each session keeps of
the endings it did not cause (:attr:`tenure._core.state.Session.missed`),
``MISSED_FIELDS`` values each (new in version 3). Version 4 adds the hold number
to owners, waiters and missed endings (a session may hold a semaphore more than
once). Version 5 adds each session's client identity (host, pid, name) and
creation time, each owner's grant time and each waiter's queue time. Version 6
adds each node's annex (``"annex"``: key -> bytes, only on a node that has one;
absent: none); the version changed so that an older server refuses such a snapshot
instead of loading it without the annex. Version 7 adds each waiter's arrival
number and the timeout it asked for, and the engine's last arrival number
(``last_order``). Version 8 adds each node's all-or-none sets (under ``"groups"``,
the sets' old name, kept for the snapshots written with it: the sets queued, each
its arrival number, its session, then a name and a hold number per semaphore; only
on a node that has one), and changed so that an older server refuses such a
snapshot rather than serve a set's members one by one. Version 9
adds the client's task number of each owner and waiter (``"tasks"``: ``[owner
tasks, waiter tasks]``, two lists parallel to ``owners`` and ``waiters``; only on a
node where one is not 0: deadlock detection reads them) and each node's live claims
(``"claims"``: per claim its semaphore's name, id, token, and the engine times its
``at_least`` and its end fall at, flat, ``CLAIM_FIELDS`` values each; only on a node
that has one; :mod:`tenure._core.claims`), and changed so that an older server
refuses such a snapshot rather than keep its claims forever. Version 10 adds who
owns each session, node and semaphore (``"owners"``: flat lists of ``sessions``
(id, owner), ``nodes`` (name, owner) and ``semaphores`` (node, name, owner), only
of those whose owner is a token; :mod:`tenure._core.ownership`), and changed so
that an older server refuses such a snapshot rather than forget whose they are (and
so the quotas). Versions 1 to 9 load with every object nobody's. Versions 1 (a dict per
semaphore), 2 and 3 still load, every hold 0; versions 1 to 4 load with no
identities and every time at the snapshot's ``now``; versions 1 to 5 load with no
annex; versions 1 to 7 with no sets; versions 1 to 8 with every task 0 (not known:
no deadlock is found through them) and no claims; versions 1 to 6 number their
waiters 1, 2, 3... in the order the snapshot lists them (each queue's in its order),
each with the timeout its deadline was set from (a deadline less the time it was
queued: no older version restated a wait).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tenure._core.claims import ClaimTimer, check_claim_id
from tenure._core.deadlines import (
    ClaimDeadline,
    Deadlines,
    LeaseDeadline,
    LockDelayDeadline,
    SessionDeadline,
    WaiterDeadline,
)
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.engine import Engine
from tenure._core.ownership import dump_owners, load_owners
from tenure._core.semaphore import Owner, Semaphore, Waiter, holder_key
from tenure._core.state import Node, Session
from tenure._core.stored_config import config_from_stored, config_to_stored
from tenure._core.values import (
    MAX_ANNEX_BYTES,
    MAX_ANNEX_KEYS,
    MAX_COUNT,
    ClientIdentity,
    check_annex_key,
)
from tenure.errors import ErrorCode, InvalidArgumentError

#: The bits of a holder key that are its session id (holder_key).
_SESSION_BITS = (1 << 64) - 1

#: Bumped when the layout changes; :func:`load` refuses layouts it does not know.
SNAPSHOT_VERSION = 10

#: Values per object in the flat lists (see the module docstring).
# id, node, timeout, description, protection key, seq_no, expires_at,
# host, pid, client name, created_at (the last four new in version 5)
SESSION_FIELDS = 11
SEMAPHORE_FIELDS = 7  # name, limit, data, ephemeral, blocked_until, #owners, #waiters
# session id, count, data, token, lease ttl, lease deadline, hold, since (version 5)
OWNER_FIELDS = 8
# session id, request id, count, data, deadline, lease ttl, hold, since (version 5),
# order, timeout (version 7)
WAITER_FIELDS = 10
#: Widths before version 7 (no arrival numbers) and before version 5 (no times).
_V6_WAITER_FIELDS = 8
_V4_SESSION_FIELDS, _V4_OWNER_FIELDS, _V4_WAITER_FIELDS = 7, 7, 7
CLAIM_FIELDS = 5  # name, id, token, least_until, ends_at (version 9)
MISSED_FIELDS = 7  # session id, kind (1 failed, 2 lost), name, id, code, message, hold
_FAILED, _LOST = 1, 2

Plain = dict[str, Any]


def dump(engine: Engine) -> Plain:
    """The engine's state as plain data (see the module docstring)."""
    sessions: list[object] = []
    missed: list[object] = []
    for s in engine.sessions.values():
        sessions += (
            s.session_id,
            s.node,
            s.timeout,
            s.description,
            s.protection_key,
            s.seq_no,
            s.expires_at,
            s.identity.host,
            s.identity.pid,
            s.identity.name,
            s.created_at,
        )
        for e in s.missed.values():
            if isinstance(e, AcquireFailed):
                missed += (
                    e.session_id,
                    _FAILED,
                    e.name,
                    e.request_id,
                    int(e.code),
                    e.message,
                    e.hold,
                )
            else:
                missed += (e.session_id, _LOST, e.name, e.token, int(e.code), e.message, e.hold)
    return {
        "version": SNAPSHOT_VERSION,
        "now": engine.now,
        "max_nodes": engine.max_nodes,
        "last_token": engine.last_token,
        "last_session_id": engine.last_session_id,
        "last_watch_id": engine.last_watch_id,
        "last_order": engine.last_order,
        "nodes": [_dump_node(node) for node in engine.nodes.values()],
        "sessions": sessions,
        "missed": missed,
        "owners": dump_owners(engine),
    }


def _dump_node(node: Node) -> Plain:
    semaphores: list[object] = []
    owners: list[object] = []
    waiters: list[object] = []
    owner_tasks: list[int] = []
    waiter_tasks: list[int] = []
    for sem in node.semaphores.values():
        held, queued = sem.owners, sem.waiters
        semaphores += (
            sem.name,
            sem.limit,
            sem.data,
            sem.ephemeral,
            sem.blocked_until,
            len(held),
            len(queued),
        )
        for o in held.values():
            owners += (
                o.session_id,
                o.count,
                o.data,
                o.token,
                o.lease_ttl,
                o.lease_deadline,
                o.hold,
                o.since,
            )
            owner_tasks.append(o.task)
        for w in queued.values():
            waiters += (
                w.session_id,
                w.request_id,
                w.count,
                w.data,
                w.deadline,
                w.lease_ttl,
                w.hold,
                w.since,
                w.order,
                w.timeout,
            )
            waiter_tasks.append(w.task)
    plain: Plain = {
        "name": node.name,
        "config": config_to_stored(node.config),  # the names snapshots always had
        "semaphores": semaphores,
        "owners": owners,
        "waiters": waiters,
    }
    if any(owner_tasks) or any(waiter_tasks):  # (else every task 0: no key at all)
        plain["tasks"] = [owner_tasks, waiter_tasks]
    if node.annex:  # (most nodes have none: no key at all for them)
        plain["annex"] = dict(node.annex)
    if node.sets:
        # (a holder key of a hold above 0 is wider than msgpack's 64 bits: the
        # session id, then each member's name and hold number). "groups": the sets'
        # old name, kept for the snapshots written with it.
        plain["groups"] = [
            [order, members[0][1] & _SESSION_BITS, [p for n, k in members for p in (n, k >> 64)]]
            for order, members in node.sets.items()
        ]
    if node.claims:
        plain["claims"] = [
            value
            for name, t in node.claims.items()
            for value in (name, t.claim_id, t.token, t.least_until, t.ends_at)
        ]
    return plain


def load(data: Plain) -> Engine:
    """An engine equal to the one :func:`dump` saw (without watches).

    Raises:
        InvalidArgumentError: the data is not a snapshot this version can read.
    """
    version = data.get("version") if isinstance(data, dict) else None
    if version not in (1, 2, 3, 4, 5, 6, 7, 8, 9, SNAPSHOT_VERSION):
        raise InvalidArgumentError(
            f"not a tenure engine snapshot of version 1 to {SNAPSHOT_VERSION} (got {version!r})"
        )
    try:
        return _load(data, version)
    except (KeyError, TypeError, ValueError, StopIteration) as error:
        raise InvalidArgumentError(f"malformed engine snapshot: {error!r}") from None


def _rows(flat: list[Any], width: int) -> Iterator[tuple[Any, ...]]:
    """``flat`` as tuples of ``width`` values (the same iterator zipped with itself)."""
    if not isinstance(flat, list) or len(flat) % width:
        raise ValueError(f"a flat list of {width}-value rows has {len(flat)} values")
    it = iter(flat)
    return zip(*[it] * width, strict=True)


def _load(data: Plain, version: int) -> Engine:
    engine = Engine(max_nodes=data["max_nodes"])
    engine.now = float(data["now"])
    engine.last_token = int(data["last_token"])
    engine.last_session_id = int(data["last_session_id"])
    engine.last_watch_id = int(data["last_watch_id"])
    engine.last_order = int(data["last_order"]) if version > 6 else 0
    for plain in data["nodes"]:
        node = Node(plain["name"], config_from_stored(plain["config"]).validated())
        if version > 5:
            node.annex = _annex(plain.get("annex"))
        if version > 7:
            node.sets = _sets(plain.get("groups"))  # (the sets' old name)
        if version > 8:
            node.claims = _claims(plain.get("claims"))
        engine.nodes[node.name] = node
    sessions = data["sessions"]
    if version > 4:
        rows = _rows(sessions, SESSION_FIELDS)
    else:  # no identity; opened, as far as anyone can tell, when the snapshot was taken
        old = _rows(sessions, _V4_SESSION_FIELDS) if version > 1 else iter(sessions)
        rows = ((*row, "", 0, "", engine.now) for row in old)
    identities: dict[ClientIdentity, ClientIdentity] = {}
    for sid, node_name, timeout, description, key, seq_no, expires_at, *who in rows:
        host, pid, name, created_at = who
        node = engine.nodes[node_name]
        identity = ClientIdentity(host, pid, name)
        # One object per distinct client, not one per session (a client opens many).
        identity = identities.setdefault(identity, identity)
        # The node's own name object, not one more copy per session.
        session = Session(
            sid,
            node.name,
            timeout,
            description,
            key,
            seq_no,
            expires_at,
            identity=identity,
            created_at=created_at,
        )
        engine.sessions[sid] = session
        node.sessions.add(sid)
    for plain in data["nodes"]:
        node = engine.nodes[plain["name"]]
        if version > 6:
            _load_semaphores(engine, node, plain, OWNER_FIELDS, WAITER_FIELDS, _tasks(plain))
        elif version > 4:
            _load_semaphores(engine, node, plain, OWNER_FIELDS, _V6_WAITER_FIELDS)
        elif version > 3:
            _load_semaphores(engine, node, plain, _V4_OWNER_FIELDS, _V4_WAITER_FIELDS)
        elif version > 1:
            _load_semaphores_v2(engine, node, plain)
        else:
            _load_semaphores_v1(engine, node, plain["semaphores"])
    if version > 2:
        width = MISSED_FIELDS if version > 3 else MISSED_FIELDS - 1
        for sid, kind, name, number, code, message, *hold in _rows(data["missed"], width):
            effect: AcquireFailed | LeaseLost
            if kind == _FAILED:
                effect = AcquireFailed(sid, number, name, ErrorCode(code), message, *hold)
            elif kind == _LOST:
                effect = LeaseLost(sid, name, number, ErrorCode(code), message, *hold)
            else:
                raise ValueError(f"unknown kind of missed ending {kind!r}")
            session = engine.sessions[sid]
            limit = engine.nodes[session.node].config.max_missed_per_session
            session.note_missed(effect, limit)
    engine.rebuild_indexes()  # (the dicts were filled directly: sorted once here)
    engine.reschedule_all()
    load_owners(engine, data.get("owners") if version > 9 else None)
    return engine


def _sets(plain: object) -> dict[int, tuple[tuple[str, int], ...]]:
    """A node's queued all-or-none sets as a snapshot keeps them (absent: none)."""
    if plain is None:
        return {}
    if not isinstance(plain, list):
        raise ValueError(f"a node's sets are a list, got {type(plain).__name__}")
    sets: dict[int, tuple[tuple[str, int], ...]] = {}
    for order, session_id, flat in plain:
        members = tuple(
            (str(name), holder_key(int(session_id), int(hold))) for name, hold in _rows(flat, 2)
        )
        if len(members) < 2:
            raise ValueError(f"set {order!r} has {len(members)} member(s)")
        sets[int(order)] = members
    return sets


def _claims(plain: object) -> dict[str, ClaimTimer]:
    """A node's live claims as a snapshot keeps them (absent: none)."""
    if plain is None:
        return {}
    if not isinstance(plain, list):
        raise ValueError(f"a node's claims are a list, got {type(plain).__name__}")
    claims: dict[str, ClaimTimer] = {}
    for name, claim_id, token, least_until, ends_at in _rows(plain, CLAIM_FIELDS):
        if type(token) is not int or token < 1:
            raise ValueError(f"claim of {name!r} has token {token!r}")
        claims[str(name)] = ClaimTimer(
            check_claim_id(claim_id), token, float(least_until), float(ends_at)
        )
    return claims


def _annex(plain: object) -> dict[str, bytes] | None:
    """A node's annex as a snapshot keeps it (None: it has none), checked as the engine would."""
    if plain is None:
        return None
    if not isinstance(plain, dict):
        raise ValueError(f"a node's annex is a map, got {type(plain).__name__}")
    annex: dict[str, bytes] = {}
    for key, value in plain.items():
        if not isinstance(value, bytes) or not value or len(value) > MAX_ANNEX_BYTES:
            raise ValueError(f"annex value of {key!r} is not 1 to {MAX_ANNEX_BYTES} bytes")
        annex[check_annex_key(key)] = value
    if len(annex) > MAX_ANNEX_KEYS:
        raise ValueError(f"an annex of {len(annex)} keys (at most {MAX_ANNEX_KEYS})")
    return annex or None


def _tasks(plain: Plain) -> tuple[Iterator[int], Iterator[int]] | None:
    """A node's owners' and waiters' task numbers (None: every one 0, or before version 9)."""
    tasks = plain.get("tasks")
    if tasks is None:
        return None
    owner_tasks, waiter_tasks = tasks
    for task in (*owner_tasks, *waiter_tasks):
        if type(task) is not int or task < 0:
            raise ValueError(f"a task number is an int of 0 or more, got {task!r}")
    if len(owner_tasks) * OWNER_FIELDS != len(plain["owners"]) or len(
        waiter_tasks
    ) * WAITER_FIELDS != len(plain["waiters"]):
        raise ValueError(f"node {plain['name']!r}: not one task per owner and per waiter")
    return iter(owner_tasks), iter(waiter_tasks)


def _load_semaphores(
    engine: Engine,
    node: Node,
    plain: Plain,
    owner_fields: int,
    waiter_fields: int,
    tasks: tuple[Iterator[int], Iterator[int]] | None = None,
) -> None:
    """Versions 4 to 9 (version 4 has no since-times: they read as the snapshot's now;
    versions before 7 no arrival numbers: see :func:`_numbered`; versions before 9 no
    task numbers, nor a node whose every task is 0)."""
    owners = _rows(plain["owners"], owner_fields)
    waiters = _rows(plain["waiters"], waiter_fields)
    owner_tasks, waiter_tasks = tasks if tasks is not None else (None, None)
    then = shared_since = engine.now
    timed = owner_fields > _V4_OWNER_FIELDS  # version 5: each grant's time at the end
    sessions = engine.sessions
    semaphores = node.semaphores
    for name, limit, data, ephemeral, blocked, n_owners, n_waiters in _rows(
        plain["semaphores"], SEMAPHORE_FIELDS
    ):
        # (The hot loop of a restart: _semaphore and _shared, inlined.)
        sem = Semaphore(name, MAX_COUNT if limit == MAX_COUNT else limit, data, ephemeral=ephemeral)
        if blocked:
            sem.blocked_until = blocked
        semaphores[name] = sem
        for _ in range(n_owners):
            # (Two unpackings rather than one into ``*since``: no list per owner.)
            if timed:
                sid, count, odata, token, ttl, deadline, hold, granted = next(owners)
            else:
                sid, count, odata, token, ttl, deadline, hold = next(owners)
                granted = then
            count = MAX_COUNT if count == MAX_COUNT else count
            if granted == shared_since:  # one float for a run of grants of one instant,
                granted = shared_since  # as the engine keeps them
            shared_since = granted
            session = sessions[sid]  # its id object, not one more per hold (as the engine)
            sid = session.session_id
            task = 0 if owner_tasks is None else next(owner_tasks)
            sem.set_owner(Owner(sid, count, odata, token, ttl, deadline, hold, granted, task))
            session.add_hold(name, hold)
        for _ in range(n_waiters):
            sid, request_id, count, wdata, deadline, ttl, hold, *rest = next(waiters)
            queued = rest[0] if rest else then
            if len(rest) > 1:
                order, timeout = rest[1], rest[2]
                waiter = Waiter(
                    sid,
                    request_id,
                    _shared(count),
                    wdata,
                    deadline,
                    ttl,
                    hold,
                    queued,
                    order,
                    timeout,
                )
            else:
                waiter = _numbered(
                    engine,
                    Waiter(sid, request_id, _shared(count), wdata, deadline, ttl, hold, queued),
                )
            if waiter_tasks is not None:
                waiter.task = next(waiter_tasks)
            sem.enqueue(waiter)
            sessions[sid].add_wait(name, hold, waiter.task)
    if next(owners, None) is not None or next(waiters, None) is not None:
        raise ValueError(f"node {node.name!r}: owners or waiters left over")


def _load_semaphores_v2(engine: Engine, node: Node, plain: Plain) -> None:
    """Versions 2 and 3: flat lists as now, without hold numbers (every hold 0)."""
    then = engine.now
    owners = _rows(plain["owners"], _V4_OWNER_FIELDS - 1)
    waiters = _rows(plain["waiters"], _V4_WAITER_FIELDS - 1)
    for name, limit, data, ephemeral, blocked, n_owners, n_waiters in _rows(
        plain["semaphores"], SEMAPHORE_FIELDS
    ):
        sem = _semaphore(node, name, limit, data, ephemeral, blocked)
        for _ in range(n_owners):
            sid, count, odata, token, ttl, deadline = next(owners)
            sem.set_owner(Owner(sid, _shared(count), odata, token, ttl, deadline, since=then))
            engine.sessions[sid].add_hold(name)
        for _ in range(n_waiters):
            sid, request_id, count, wdata, deadline, ttl = next(waiters)
            waiter = Waiter(sid, request_id, _shared(count), wdata, deadline, ttl, since=then)
            sem.enqueue(_numbered(engine, waiter))
            engine.sessions[sid].add_wait(name)
    if next(owners, None) is not None or next(waiters, None) is not None:
        raise ValueError(f"node {node.name!r}: owners or waiters left over")


def _load_semaphores_v1(engine: Engine, node: Node, semaphores: list[Plain]) -> None:
    then = engine.now
    for p in semaphores:
        sem = _semaphore(node, p["name"], p["limit"], p["data"], p["ephemeral"], p["blocked_until"])
        for sid, count, odata, token, ttl, deadline in p["owners"]:
            sem.set_owner(Owner(sid, _shared(count), odata, token, ttl, deadline, since=then))
            engine.sessions[sid].add_hold(sem.name)
        for sid, request_id, count, wdata, deadline, ttl in p["waiters"]:
            waiter = Waiter(sid, request_id, _shared(count), wdata, deadline, ttl, since=then)
            sem.enqueue(_numbered(engine, waiter))
            engine.sessions[sid].add_wait(sem.name)


def _numbered(engine: Engine, waiter: Waiter) -> Waiter:
    """A waiter of a snapshot before version 7, given the next arrival number and the
    timeout its deadline was set from (versions before 7 never restated a wait, so
    its deadline is its queue time plus that timeout)."""
    engine.last_order += 1
    waiter.order = engine.last_order
    if waiter.deadline is not None:
        waiter.timeout = max(waiter.deadline - waiter.since, 0.0)
    return waiter


def _semaphore(
    node: Node, name: str, limit: int, data: bytes, ephemeral: bool, blocked: float
) -> Semaphore:
    sem = Semaphore(name, _shared(limit), data, ephemeral=ephemeral)
    sem.blocked_until = blocked if blocked else 0.0  # the shared 0.0, not one per semaphore
    node.semaphores[name] = sem
    return sem


def _shared(count: int) -> int:
    """The one MAX_COUNT object for every mutex (as the engine keeps it), else ``count``."""
    return MAX_COUNT if count == MAX_COUNT else count


def resume(engine: Engine, now: float) -> None:
    """Move a loaded engine onto a new process's clock, whose time is ``now``.

    See the module docstring for what each kind of deadline becomes. The deadline
    heap is rebuilt in the same walk that moves the times (as
    :meth:`~tenure._core.state.EngineState.reschedule_all` would, in its order):
    a restart walks a hundred thousand semaphores once, not twice.
    """
    shift = now - engine.now
    deadlines = Deadlines()
    moved_from, moved_to = None, 0.0
    for session in engine.sessions.values():
        session.expires_at = now + session.timeout
        session.created_at += shift
        deadlines.schedule(session.expires_at, SessionDeadline(session.session_id))
    for node in engine.nodes.values():
        for name, timer in node.claims.items():
            timer.least_until += shift
            timer.ends_at += shift
            deadlines.schedule(timer.ends_at, ClaimDeadline(node.name, name, timer.token))
        for sem in node.semaphores.values():
            sem.blocked_until = sem.blocked_until + shift if sem.blocked_until > engine.now else 0.0
            if sem.blocked_until:
                deadlines.schedule(sem.blocked_until, LockDelayDeadline(node.name, sem.name))
            if sem.queue_length():
                for waiter in sem.waiters.values():
                    waiter.since += shift
                    if waiter.deadline is not None:
                        waiter.deadline += shift
                        key = WaiterDeadline(node.name, sem.name, waiter.key, waiter.request_id)
                        deadlines.schedule(waiter.deadline, key)
            for owner in sem.each_owner():
                if owner.since is not moved_from:  # (a run of one instant stays one float)
                    moved_from, moved_to = owner.since, owner.since + shift
                owner.since = moved_to
                ttl = owner.lease_ttl
                if ttl is not None:
                    owner.lease_deadline = now + ttl
                    lease = LeaseDeadline(node.name, sem.name, owner.key, owner.token)
                    deadlines.schedule(now + ttl, lease)
    engine.now = now
    engine.deadlines = deadlines
