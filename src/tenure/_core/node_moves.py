"""A node moved from one engine to another: a move between cells (docs/cluster.md).

A move takes the node out of its cell's engine as a snapshot of its own
(:func:`~tenure._core.snapshot.dump_node`: the node, its sessions, what they hold and
wait for, their owners and the engine's counters), puts it into the other cell's
engine (:func:`import_node`), and then forgets it where it was
(:func:`forget_moved_node`). Nobody is told anything by either engine: a moved hold
is not lost, a moved wait not failed, a moved session not ended. What the node's
clients must do (re-attach on the new cell) is the hosts' to tell them.

What an import keeps, on the importing engine's clock:

* **Tokens.** The fencing counter is raised to the mark (the exporting engine's
  counter, at least every token the node ever had), so that every token granted
  after the move is greater than every token before it (rule 3, across cells).
* **Queue order.** The arrival counter is raised the same way: a request queued after
  the move comes after every request that moved with the node.
* **Sessions and their times**, as a restart keeps them
  (:func:`~tenure._core.snapshot.resume`): each session keeps its id and is detached,
  with a fresh recovery window from the import, until its client re-attaches; holds,
  leases, waits, lock-delays, claims and max_holds keep the time they had left.
* **Usage.** What each owner holds moves with it, counted on this engine's ledger;
  an import past an owner's quota or the memory budget is refused.

Session ids are a service's, not a cell's: an import whose session ids this engine
has, or may give out later (above its counter in its block of
:data:`SESSION_ID_BLOCK` ids), is refused. Each cell gives out ids from a block of its
own, so that a node's sessions keep their ids wherever it moves.

Every refusal changes nothing. Watches do not move (they belong to connections: a
client re-arms its watches on the new cell, reading the latest state, as after a
re-attach).

A node is **frozen** while it moves (``EngineState.moving``: the other cell, and the
time it froze): it takes no command (:mod:`tenure._core.moving`) and none of its
deadlines comes due, so that every copy of it taken meanwhile is the same. The source
freezes it (:func:`freeze_node`: each attached session is told ``WRONG_CELL`` in a
SessionEnded, so that its client stops counting on this cell and re-attaches where
the node then lives), exports it as of the time it froze (:func:`export_node`), and
then forgets it (:func:`drop_moved_node`) or, if the move fails, thaws it
(:func:`thaw_node`). The target takes the copy in frozen (:func:`import_moved_node`)
and thaws it once the directory places the node on it. A thaw is the node taken out
and put back (:func:`import_node` on the same engine): every session detached with a
whole recovery window, every timer keeping the time it had left when it froze.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from tenure._core.deadlines import SessionDeadline
from tenure._core.effects import SessionEnded
from tenure._core.engine import Engine
from tenure._core.node import Node
from tenure._core.ownership import counted_usage, owner_of
from tenure._core.quotas import TRACKED
from tenure._core.snapshot import Plain, dump_node, load, resume
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    PreconditionFailedError,
)

__all__ = [
    "SESSION_ID_BLOCK",
    "drop_moved_node",
    "export_node",
    "forget_moved_node",
    "freeze_node",
    "import_moved_node",
    "import_node",
    "reserve_session_block",
    "thaw_node",
]

#: The ids an engine gives its sessions lie in one block of this many (an engine whose
#: counter starts at ``k * SESSION_ID_BLOCK`` gives out ids of block ``k``): what a
#: service's cells split between them (2**40: a trillion sessions a cell, and 8,192
#: cells within a JavaScript number's 53 bits).
SESSION_ID_BLOCK: Final = 1 << 40


def import_node(engine: Engine, plain: Plain, now: float) -> str:
    """Put the node of ``plain`` (:func:`~tenure._core.snapshot.dump_node`'s) into
    ``engine`` at time ``now`` (module docstring); its name.

    Raises:
        InvalidArgumentError: ``plain`` is not one node's snapshot.
        AlreadyExistsError: ``engine`` has a node of that name, or a session of one
            of its ids.
        PreconditionFailedError: ``engine`` may give one of those ids out later.
        LimitExceededError: ``engine`` has ``max_nodes`` nodes already, or an owner's
            quota or the memory budget would be passed.
    """
    nodes = plain.get("nodes") if isinstance(plain, dict) else None
    if not isinstance(nodes, list) or len(nodes) != 1:
        raise InvalidArgumentError("a node's move carries one node's snapshot")
    part = load(plain, counted=False)
    [node] = part.nodes.values()
    _check_room(engine, node, part.sessions.keys())
    now = max(now, engine.now)
    if engine.deadlines.any_due(now):
        engine.tick(now)  # (rule 6: what ends by now ends before the node arrives)
    resume(part, now)
    counts = counted_usage(part)
    ledger = engine.ledger
    total = [0] * len(TRACKED)
    for owner, owned in counts.items():
        ledger.check_all(ledger.of(owner), list(enumerate(owned)))  # (its quotas)
        total = [a + b for a, b in zip(total, owned, strict=True)]
    # The memory budget, for the whole node at once (each owner's part alone could
    # pass where all of them do not), asked as nobody's (no quota is nobody's).
    ledger.check_all(ledger.of(""), list(enumerate(total)))
    _adopt_usage(engine, part, node)
    engine.nodes[node.name] = node
    engine.node_index.add(node.name)
    for session in part.sessions.values():
        engine.sessions[session.session_id] = session
        engine.index_client(session)
        if session.expires_at is not None:
            engine.deadlines.schedule(session.expires_at, SessionDeadline(session.session_id))
    engine.schedule_node(engine.deadlines, node)
    engine.last_token = max(engine.last_token, part.last_token)
    engine.last_order = max(engine.last_order, part.last_order)
    if ledger.counting:
        for owner, owned in counts.items():
            usage = ledger.of(owner)
            for index, amount in enumerate(owned):
                if amount:
                    usage.add(index, amount)
    return node.name


def forget_moved_node(engine: Engine, name: str) -> None:
    """Forget the node ``name`` and its sessions, which another engine serves now: as a
    forced DropNode does, but with nothing ended (no hold lost, no wait failed, no
    session ended, no statistics of ends), and nobody told.

    Raises:
        NotFoundError: there is no node ``name``.
    """
    node = engine.lookup_node(name)
    for session_id in sorted(node.sessions):
        engine.forget_session(engine.sessions[session_id], node)  # (watches disarmed)
    node.uncount_semaphores()
    engine.drop_node(node.name)
    engine.forget_deadlocks(node.name)
    engine.name_stats.forget_node(node.name)


def freeze_node(engine: Engine, name: str, cell: str, now: float) -> None:
    """Freeze node ``name`` at ``now`` for its move to cell ``cell`` (module docstring);
    nothing if it is frozen for that move already.

    Raises:
        NotFoundError: there is no node ``name``.
        PreconditionFailedError: it is frozen for a move with another cell.
    """
    node = engine.lookup_node(name)
    frozen = engine.moving.get(name)
    if frozen is not None:
        if frozen[0] != cell:
            raise PreconditionFailedError(
                f"node {name!r} is moving with cell {frozen[0]!r} already, not {cell!r}"
            )
        return
    now = max(now, engine.now)
    if engine.deadlines.any_due(now):
        engine.tick(now)  # (rule 6: what ends by now ends before the node freezes)
    engine.moving[name] = (cell, now)
    why = (
        f"node {name!r} is moving to cell {cell!r}: re-attach the session where the "
        "service's directory places the node"
    )
    for session_id in sorted(node.sessions):
        if engine.sessions[session_id].expires_at is None:  # (attached: told)
            engine.effects.append(SessionEnded(session_id, ErrorCode.WRONG_CELL, why))


def export_node(engine: Engine, name: str) -> Plain:
    """The copy of frozen node ``name`` that moves, as of the time it froze (module
    docstring).

    Raises:
        PreconditionFailedError: node ``name`` is not frozen.
    """
    frozen = engine.moving.get(name)
    if frozen is None:
        raise PreconditionFailedError(f"node {name!r} is not frozen for a move")
    return dump_node(engine, name, at=frozen[1])


def thaw_node(engine: Engine, name: str, now: float) -> None:
    """Serve frozen node ``name`` again from ``now`` (module docstring); nothing if it
    is not frozen."""
    frozen = engine.moving.get(name)
    if frozen is None:
        return
    plain = dump_node(engine, name, at=frozen[1])
    del engine.moving[name]
    forget_moved_node(engine, name)
    # (Its own usage coming back: counted as it was, past a quota lowered meanwhile.)
    enforcing, engine.ledger.enforcing = engine.ledger.enforcing, False
    try:
        import_node(engine, plain, now)
    finally:
        engine.ledger.enforcing = enforcing


def import_moved_node(engine: Engine, plain: Plain, cell: str, now: float) -> str:
    """:func:`import_node`, the node frozen on arrival (from cell ``cell``) until it is
    thawed here; its name. A node frozen here for that move already is taken as it is
    (the import was sent again).

    Raises:
        As :func:`import_node`.
    """
    nodes = plain.get("nodes") if isinstance(plain, dict) else None
    name = nodes[0].get("name") if isinstance(nodes, list) and len(nodes) == 1 else None
    frozen = engine.moving.get(name) if isinstance(name, str) else None
    if isinstance(name, str) and frozen is not None and frozen[0] == cell:
        return name
    name = import_node(engine, plain, now)
    engine.moving[name] = (cell, max(now, engine.now))
    return name


def drop_moved_node(engine: Engine, name: str) -> None:
    """Forget node ``name``, moved to another cell that serves it now (nothing if it is
    not here)."""
    engine.moving.pop(name, None)
    if name in engine.nodes:
        forget_moved_node(engine, name)


def reserve_session_block(engine: Engine, block: int) -> None:
    """Give this engine's sessions ids of block ``block`` (of :data:`SESSION_ID_BLOCK`
    ids) from now on: its counter raised to the block's start, if below it."""
    engine.last_session_id = max(engine.last_session_id, block * SESSION_ID_BLOCK)


def _check_room(engine: Engine, node: Node, session_ids: Iterable[int]) -> None:
    """Refuse the import of ``node`` and sessions ``session_ids`` (module docstring)."""
    if node.name in engine.nodes:
        raise AlreadyExistsError(f"node {node.name!r} exists here: it cannot move in")
    if len(engine.nodes) >= engine.max_nodes:
        raise LimitExceededError(f"max_nodes ({engine.max_nodes}) reached")
    counter = engine.last_session_id
    block_end = (counter // SESSION_ID_BLOCK + 1) * SESSION_ID_BLOCK
    for sid in sorted(session_ids):
        if sid in engine.sessions:
            raise AlreadyExistsError(
                f"session {sid} of node {node.name!r} is one of this engine's already"
            )
        if counter < sid < block_end:
            raise PreconditionFailedError(
                f"session {sid} of node {node.name!r} has an id this engine gives out "
                f"later (up to {block_end - 1}): each cell gives its sessions ids of a "
                "block of its own"
            )


def _adopt_usage(engine: Engine, part: Engine, node: Node) -> None:
    """Point what ``part`` holds at the owners of ``engine``'s ledger (as
    :func:`~tenure._core.ownership.load_owners` gives a loaded engine's)."""
    of = engine.ledger.of
    for session in part.sessions.values():
        session.usage = of(owner_of(session.usage))
    node.usage = of(owner_of(node.usage))
    for sem in node.semaphores.values():
        sem.usage = of(owner_of(sem.usage))
        for holder in sem.each_owner():
            holder.usage = part.sessions[holder.session_id].usage
        for waiter in sem.waiters.values():
            waiter.usage = part.sessions[waiter.session_id].usage
