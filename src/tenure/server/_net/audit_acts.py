"""Which native requests the audit log records, and what each line names (``--audit-log``).

The native face (:mod:`tenure.server._net.native`) asks :func:`act_of` of each answer
it gives: an administrative command (a node created, altered, dropped, its annex set;
a session killed) is recorded whatever its outcome; any other command only when it
is refused by its token's rights (``denied``) or by a quota or the memory budget
(``quota_refused``). :func:`what_of` names what the command acted on: the command,
the node, and for each kind what tells the act apart (a kill's session, an alteration's
settings, a drop's ``force``, an annex's key, the session an attach or a resume
names). Never the data a command carries (an annex's value, a semaphore's data, a
protection key: a client's bytes may be anything, a secret too).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from tenure._core import (
    AlterNode,
    AttachSession,
    Command,
    CreateNode,
    DropNode,
    KillSession,
    ResumeSession,
    SetNodeAnnex,
)
from tenure.errors import ErrorCode
from tenure.server._net.auth import SessionLike, command_node

__all__ = ["ADMIN_ACTS", "act_of", "what_of"]

#: The administrative commands, by type: the act each is recorded as.
ADMIN_ACTS: Final[Mapping[type, str]] = {
    CreateNode: "node_create",
    AlterNode: "node_alter",
    DropNode: "node_drop",
    SetNodeAnnex: "node_annex",
    KillSession: "kill_session",
}


def act_of(command: Command[object], code: ErrorCode | None, quota: str | None) -> str | None:
    """The act an answer to ``command`` is recorded as (``code`` None: a Reply; ``quota``:
    the quota that refused it), or None: not recorded."""
    admin = ADMIN_ACTS.get(type(command))
    if code is None:
        return admin
    if quota is not None:
        return "quota_refused"
    if admin is not None:
        return admin
    if code is ErrorCode.PERMISSION_DENIED:
        return "denied"
    return None


def what_of(
    command: Command[object], sessions: Mapping[int, SessionLike], quota: str | None
) -> dict[str, object]:
    """What ``command`` acted on, for its audit line (module docstring)."""
    what: dict[str, object] = {"command": type(command).__name__}
    node = command_node(command, sessions)
    if node is not None:
        what["node"] = node
    if isinstance(command, KillSession | AttachSession | ResumeSession):
        what["session_id"] = command.session_id
    elif isinstance(command, AlterNode):
        what["changes"] = {str(name): value for name, value in command.changes.items()}
    elif isinstance(command, DropNode):
        what["force"] = command.force
    elif isinstance(command, SetNodeAnnex):
        what["key"] = command.key
    if quota is not None:
        what["quota"] = quota
    return what
