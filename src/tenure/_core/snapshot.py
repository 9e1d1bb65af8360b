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
* acquire timeouts and lock-delays keep the time they had left.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tenure._core.engine import Engine
from tenure._core.semaphore import Owner, Semaphore, Waiter
from tenure._core.state import Node, Session
from tenure._core.values import NodeConfig
from tenure.errors import InvalidArgumentError

#: Bumped when the layout changes; :func:`load` refuses layouts it does not know.
SNAPSHOT_VERSION = 1

Plain = dict[str, Any]


def dump(engine: Engine) -> Plain:
    """The engine's state as plain data (see the module docstring)."""
    return {
        "version": SNAPSHOT_VERSION,
        "now": engine.now,
        "max_nodes": engine.max_nodes,
        "last_token": engine.last_token,
        "last_session_id": engine.last_session_id,
        "last_watch_id": engine.last_watch_id,
        "nodes": [_dump_node(node) for node in engine.nodes.values()],
        "sessions": [
            [
                s.session_id,
                s.node,
                s.timeout,
                s.description,
                s.protection_key,
                s.seq_no,
                s.expires_at,
            ]
            for s in engine.sessions.values()
        ],
    }


def _dump_node(node: Node) -> Plain:
    return {
        "name": node.name,
        "config": dataclasses.asdict(node.config),
        "semaphores": [
            {
                "name": sem.name,
                "limit": sem.limit,
                "data": sem.data,
                "ephemeral": sem.ephemeral,
                "blocked_until": sem.blocked_until,
                "owners": [
                    [o.session_id, o.count, o.data, o.token, o.lease_ttl, o.lease_deadline]
                    for o in sem.owners.values()
                ],
                "waiters": [
                    [w.session_id, w.request_id, w.count, w.data, w.deadline, w.lease_ttl]
                    for w in sem.waiters.values()
                ],
            }
            for sem in node.semaphores.values()
        ],
    }


def load(data: Plain) -> Engine:
    """An engine equal to the one :func:`dump` saw (without watches).

    Raises:
        InvalidArgumentError: the data is not a snapshot this version can read.
    """
    if not isinstance(data, dict) or data.get("version") != SNAPSHOT_VERSION:
        version = data.get("version") if isinstance(data, dict) else None
        raise InvalidArgumentError(f"not a tenure engine snapshot of version 1 (got {version!r})")
    try:
        return _load(data)
    except (KeyError, TypeError, ValueError) as error:
        raise InvalidArgumentError(f"malformed engine snapshot: {error!r}") from None


def _load(data: Plain) -> Engine:
    engine = Engine(max_nodes=data["max_nodes"])
    engine.now = float(data["now"])
    engine.last_token = int(data["last_token"])
    engine.last_session_id = int(data["last_session_id"])
    engine.last_watch_id = int(data["last_watch_id"])
    for sid, node, timeout, description, key, seq_no, expires_at in data["sessions"]:
        engine.sessions[sid] = Session(sid, node, timeout, description, key, seq_no, expires_at)
    for plain in data["nodes"]:
        node = Node(plain["name"], NodeConfig(**plain["config"]).validated())
        engine.nodes[node.name] = node
        for p in plain["semaphores"]:
            sem = Semaphore(p["name"], p["limit"], p["data"], ephemeral=p["ephemeral"])
            sem.blocked_until = p["blocked_until"]
            node.semaphores[sem.name] = sem
            for sid, count, odata, token, ttl, deadline in p["owners"]:
                sem.set_owner(Owner(sid, count, odata, token, ttl, deadline))
                engine.sessions[sid].holds.add(sem.name)
            for sid, request_id, count, wdata, deadline, ttl in p["waiters"]:
                sem.enqueue(Waiter(sid, request_id, count, wdata, deadline, ttl))
                engine.sessions[sid].add_wait(sem.name)
    for session in engine.sessions.values():
        engine.nodes[session.node].sessions.add(session.session_id)
    engine._schedule_all()
    return engine


def resume(engine: Engine, now: float) -> None:
    """Move a loaded engine onto a new process's clock, whose time is ``now``.

    See the module docstring for what each kind of deadline becomes.
    """
    shift = now - engine.now
    for session in engine.sessions.values():
        session.expires_at = now + session.timeout
    for node in engine.nodes.values():
        for sem in node.semaphores.values():
            sem.blocked_until = sem.blocked_until + shift if sem.blocked_until > engine.now else 0.0
            for waiter in sem.waiters.values():
                if waiter.deadline is not None:
                    waiter.deadline += shift
            for owner in sem.owners.values():
                if owner.lease_ttl is not None:
                    owner.lease_deadline = now + owner.lease_ttl
    engine.now = now
    engine._schedule_all()
