"""Loading an engine snapshot: the current layout, and every older one that still loads.

What each version adds, and what an older one loads as: :mod:`tenure._core.snapshot_layout`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tenure._core.claims import ClaimTimer, check_claim_id
from tenure._core.effects import AcquireFailed, LeaseLost
from tenure._core.engine import Engine
from tenure._core.node import Node
from tenure._core.ownership import load_owners
from tenure._core.semaphore import Owner, Semaphore, Waiter, holder_key
from tenure._core.session import KEY_DIGEST_BYTES, digest_key
from tenure._core.snapshot_layout import (
    CLAIM_FIELDS,
    MISSED_FAILED,
    MISSED_FIELDS,
    MISSED_LOST,
    OWNER_FIELDS,
    SEMAPHORE_FIELDS,
    SESSION_FIELDS,
    SNAPSHOT_VERSION,
    V4_OWNER_FIELDS,
    V4_SESSION_FIELDS,
    V4_WAITER_FIELDS,
    V6_WAITER_FIELDS,
    WAITER_FIELDS,
    Plain,
)
from tenure._core.state import Session
from tenure._core.stored_config import config_from_stored
from tenure._core.values import (
    MAX_ANNEX_BYTES,
    MAX_ANNEX_KEYS,
    MAX_COUNT,
    ClientIdentity,
    check_annex_key,
)
from tenure.errors import ErrorCode, InvalidArgumentError


def load(data: Plain, *, counted: bool = True) -> Engine:
    """An engine equal to the one :func:`dump` saw (without watches).

    ``counted=False``: its ledger comes back paused instead of counting every owner's
    usage from the whole state (:func:`~tenure._core.ownership.load_owners`): for a
    host that pauses it anyway, or sets a quota or a budget, which counts then.

    Raises:
        InvalidArgumentError: the data is not a snapshot this version can read.
    """
    version = data.get("version") if isinstance(data, dict) else None
    if version not in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, SNAPSHOT_VERSION):
        raise InvalidArgumentError(
            f"not a tenure engine snapshot of version 1 to {SNAPSHOT_VERSION} (got {version!r})"
        )
    try:
        return _load(data, version, counted)
    except (KeyError, TypeError, ValueError, StopIteration) as error:
        raise InvalidArgumentError(f"malformed engine snapshot: {error!r}") from None


def _rows(flat: list[Any], width: int) -> Iterator[tuple[Any, ...]]:
    """``flat`` as tuples of ``width`` values (the same iterator zipped with itself)."""
    if not isinstance(flat, list) or len(flat) % width:
        raise ValueError(f"a flat list of {width}-value rows has {len(flat)} values")
    it = iter(flat)
    return zip(*[it] * width, strict=True)


def _load(data: Plain, version: int, counted: bool) -> Engine:
    engine = Engine(max_nodes=data["max_nodes"])
    engine.now = float(data["now"])
    engine.last_token = int(data["last_token"])
    engine.last_session_id = int(data["last_session_id"])
    engine.last_watch_id = int(data["last_watch_id"])
    engine.last_order = int(data["last_order"]) if version > 6 else 0
    engine.moving = {str(n): (str(c), float(t)) for n, c, t in data.get("moving", ())}
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
        old = _rows(sessions, V4_SESSION_FIELDS) if version > 1 else iter(sessions)
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
            _digest(key, version),
            seq_no,
            expires_at,
            identity=identity,
            created_at=created_at,
        )
        engine.sessions[sid] = session
        engine.index_client(session)
        node.sessions.add(sid)
    for plain in data["nodes"]:
        node = engine.nodes[plain["name"]]
        if version > 6:
            _load_semaphores(engine, node, plain, OWNER_FIELDS, WAITER_FIELDS, _tasks(plain))
        elif version > 4:
            _load_semaphores(engine, node, plain, OWNER_FIELDS, V6_WAITER_FIELDS)
        elif version > 3:
            _load_semaphores(engine, node, plain, V4_OWNER_FIELDS, V4_WAITER_FIELDS)
        elif version > 1:
            _load_semaphores_v2(engine, node, plain)
        else:
            _load_semaphores_v1(engine, node, plain["semaphores"])
        _load_offers(node, plain.get("offers"))
    if version > 10:
        for plain in data["nodes"]:
            _load_bounds(engine.nodes[plain["name"]], plain.get("max_holds"))
    if version > 2:
        width = MISSED_FIELDS if version > 3 else MISSED_FIELDS - 1
        for sid, kind, name, number, code, message, *hold in _rows(data["missed"], width):
            effect: AcquireFailed | LeaseLost
            if kind == MISSED_FAILED:
                effect = AcquireFailed(sid, number, name, ErrorCode(code), message, *hold)
            elif kind == MISSED_LOST:
                effect = LeaseLost(sid, name, number, ErrorCode(code), message, *hold)
            else:
                raise ValueError(f"unknown kind of missed ending {kind!r}")
            session = engine.sessions[sid]
            limit = engine.nodes[session.node].config.max_missed_per_session
            session.note_missed(effect, limit)
    engine.rebuild_indexes()  # (the dicts were filled directly: sorted once here)
    engine.reschedule_all()
    load_owners(engine, data.get("owners") if version > 9 else None, counted=counted)
    return engine


def _digest(key: object, version: int) -> bytes:
    """A session's key digest: what version 12 keeps; before, the key, hashed here."""
    if not isinstance(key, bytes) or (version > 11 and len(key) != KEY_DIGEST_BYTES):
        raise ValueError(f"a session's key is not bytes, or its digest not {KEY_DIGEST_BYTES}")
    return key if version > 11 else digest_key(key)


def _load_offers(node: Node, plain: object) -> None:
    """Put back each hand-off offer (``"offers"``: name, session id, hold, digest, flat)
    on its owner; absent (an older snapshot, or none offered): nothing."""
    if plain is None:
        return
    if not isinstance(plain, list) or len(plain) % 4:
        raise ValueError(f"node {node.name!r}: offers are not (name, session, hold, digest)s")
    for name, sid, hold, digest in _rows(plain, 4):
        sem = node.semaphores.get(name)
        owner = None if sem is None else sem.owner(holder_key(sid, hold))
        if owner is None or type(digest) is not bytes:
            raise ValueError(f"node {node.name!r}: an offer of {name!r} names no owner")
        owner.offer = digest


def _load_bounds(node: Node, plain: object) -> None:
    """A node's max_holds (version 11; absent: none), in the order its owners and
    waiters were loaded: each owner's end (engine time), each waiter's max_hold."""
    if plain is None:
        return
    if not isinstance(plain, list) or len(plain) != 2:
        raise ValueError("a node's max_holds are two lists (owners' ends, waiters' bounds)")
    owner_ends, waiter_bounds = iter(plain[0]), iter(plain[1])
    try:
        for sem in node.semaphores.values():
            for owner in sem.owners.values():
                owner.ends = _time_or_none(next(owner_ends))
            for waiter in sem.waiters.values():
                waiter.max_hold = _time_or_none(next(waiter_bounds))
    except StopIteration:
        raise ValueError(f"node {node.name!r}: not one max_hold per owner and waiter") from None
    if next(owner_ends, None) is not None or next(waiter_bounds, None) is not None:
        raise ValueError(f"node {node.name!r}: max_holds left over")


def _time_or_none(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"a max_hold is a number or nil, got {value!r}")
    return float(value)


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
    timed = owner_fields > V4_OWNER_FIELDS  # version 5: each grant's time at the end
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
    owners = _rows(plain["owners"], V4_OWNER_FIELDS - 1)
    waiters = _rows(plain["waiters"], V4_WAITER_FIELDS - 1)
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
