"""Node commands: create, describe, alter, drop; set and get a node's annex."""

from __future__ import annotations

from tenure._core import commands as c
from tenure._core.effects import AcquireFailed, LeaseLost, SessionEnded
from tenure._core.node import Node, annex_entry_bytes
from tenure._core.quotas import Q_DATA_BYTES, Q_NODES, text_bytes
from tenure._core.state import EngineState
from tenure._core.values import (
    MAX_ANNEX_BYTES,
    MAX_ANNEX_KEYS,
    NodeConfig,
    NodeDescription,
    check_annex_key,
    check_ceilings,
    check_data,
    check_name,
)
from tenure.errors import (
    AlreadyExistsError,
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    PreconditionFailedError,
)


def create_node(state: EngineState, cmd: c.CreateNode, now: float) -> None:
    """Add an empty node (at most ``state.max_nodes``)."""
    name = check_name("node", cmd.name)
    if not isinstance(cmd.config, NodeConfig):
        raise InvalidArgumentError(f"config must be a NodeConfig, got {cmd.config!r}")
    config = cmd.config.validated()
    check_ceilings(config, state.node_ceilings)
    if name in state.nodes:
        raise AlreadyExistsError(f"node {name!r} already exists")
    if len(state.nodes) >= state.max_nodes:
        raise LimitExceededError(f"max_nodes ({state.max_nodes}) reached")
    usage = state.ledger.of(state.actor)  # its owner: who sends the command
    state.check_made(usage, Q_NODES, text_bytes(name))  # (with its name)
    state.add_node(Node(name, config, usage=usage))


def describe_node(state: EngineState, cmd: c.DescribeNode, now: float) -> NodeDescription:
    """The node's settings and how many sessions and semaphores it has."""
    return _describe(state, state.lookup_node(cmd.name))


def alter_node(state: EngineState, cmd: c.AlterNode, now: float) -> NodeDescription:
    """Change some of the node's settings; reply with its new description."""
    node = state.lookup_node(cmd.name)
    bad = [name for name in cmd.changes if not isinstance(name, str)]
    if bad:
        raise InvalidArgumentError(f"node setting names must be strings, got {bad!r}")
    config = node.config.replace(**cmd.changes)
    # (Only what changes: a node made before a ceiling was lowered keeps the rest.)
    check_ceilings(config, state.node_ceilings, only=cmd.changes)
    node.config = config
    return _describe(state, node)


def drop_node(state: EngineState, cmd: c.DropNode, now: float) -> None:
    """Remove a node; with ``force``, end its sessions and fail their waits and grants."""
    node = state.lookup_node(cmd.name)
    if node.sessions and not cmd.force:
        raise PreconditionFailedError(
            f"node {node.name!r} has {len(node.sessions)} live session(s); use force=True"
        )
    message = f"node {node.name!r} was dropped"
    effects = state.effects
    for sem in node.semaphores.values():
        for waiter in sem.waiters.values():
            state.wait_ended(node, sem.name, waiter, ErrorCode.NOT_FOUND, now)
            effects.append(
                AcquireFailed(
                    waiter.session_id, waiter.request_id, sem.name, ErrorCode.NOT_FOUND, message
                )
            )
        for owner in sem.owners.values():
            state.hold_ended(node, sem.name, owner, True, now)
            effects.append(
                LeaseLost(owner.session_id, sem.name, owner.token, ErrorCode.LEASE_LOST, message)
            )
    for session_id in sorted(node.sessions):
        session = state.sessions[session_id]
        state.forget_session(session, node)  # (its watches disarmed with it)
        effects.append(
            SessionEnded(session_id, ErrorCode.SESSION_CLOSED, f"node {node.name!r} was dropped")
        )
    node.uncount_semaphores()
    state.drop_node(node.name)
    state.forget_deadlocks(node.name)
    state.name_stats.forget_node(node.name)


def set_node_annex(state: EngineState, cmd: c.SetNodeAnnex, now: float) -> None:
    """Keep ``cmd.value`` under ``cmd.key`` in the node's annex; ``b""`` removes the key."""
    node = state.lookup_node(cmd.name)
    key = check_annex_key(cmd.key)
    value = check_data(f"annex value of {key!r}", cmd.value, MAX_ANNEX_BYTES, "MAX_ANNEX_BYTES")
    annex = node.annex
    old = None if annex is None else annex.get(key)
    # (Its key counts as its value does, against the node's owner: annex_entry_bytes.)
    counted = 0 if old is None else annex_entry_bytes(key, old)
    usage = node.usage
    if not value:
        if annex is not None and annex.pop(key, None) is not None and not annex:
            node.annex = None  # an empty annex is no annex (as a new node has)
        if usage is not None and usage.live:
            usage.add(Q_DATA_BYTES, -counted)
        return
    if annex is not None and key not in annex and len(annex) >= MAX_ANNEX_KEYS:
        raise LimitExceededError(
            f"the annex of node {node.name!r} has {MAX_ANNEX_KEYS} keys, the most it may"
        )
    grown = annex_entry_bytes(key, value) - counted
    state.check_quota(usage, Q_DATA_BYTES, grown)
    if annex is None:
        node.annex = {key: value}
    else:
        annex[key] = value
    if usage is not None and usage.live:
        usage.add(Q_DATA_BYTES, grown)


def get_node_annex(state: EngineState, cmd: c.GetNodeAnnex, now: float) -> bytes:
    """The bytes the node keeps under ``cmd.key`` (``b""`` if unset)."""
    node = state.lookup_node(cmd.name)
    key = check_annex_key(cmd.key)
    annex = node.annex
    return b"" if annex is None else annex.get(key, b"")


def _describe(state: EngineState, node: Node) -> NodeDescription:
    broken = state.broken_deadlocks.get(node.name)
    return NodeDescription(
        node.name,
        node.config,
        len(node.sessions),
        len(node.semaphores),
        () if broken is None else tuple(broken),
    )
