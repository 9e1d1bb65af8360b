"""Which node a command is about, and the refusal of a command about a node that moves.

A node frozen for a move between cells (``EngineState.moving``;
:mod:`tenure._core.node_moves`) answers every command about it, its sessions' included,
``UNAVAILABLE``: its state is being copied to another cell and must not change, and
its clients are to try again (where the service's directory then places it). Commands
about no one node (ListNodes, TopNames of every node) are served as ever.
"""

from __future__ import annotations

from tenure._core.commands import Command
from tenure._core.state import EngineState
from tenure.errors import UnavailableError

__all__ = ["node_of", "refuse_if_moving"]


def node_of(state: EngineState, command: Command[object]) -> str | None:
    """The node ``command`` is about (None: no one node, or a session ``state`` lacks)."""
    node = getattr(command, "node", None)
    if type(node) is str:
        return node or None  # (TopNames of "": every node)
    session_id = getattr(command, "session_id", None)
    if type(session_id) is int:
        session = state.sessions.get(session_id)
        return None if session is None else session.node
    name = getattr(command, "name", None)  # (CreateNode, DescribeNode, AlterNode, ...)
    return name if type(name) is str and not hasattr(command, "session_id") else None


def refuse_if_moving(state: EngineState, command: Command[object]) -> None:
    """Refuse ``command`` if its node is frozen for a move.

    Raises:
        UnavailableError: it is (the message names the node and the other cell).
    """
    node = node_of(state, command)
    if node is None:
        return
    moving = state.moving.get(node)
    if moving is not None:
        raise UnavailableError(
            f"node {node!r} is moving between this cell and cell {moving[0]!r}: "
            "try again (where the service's directory then places it)"
        )
