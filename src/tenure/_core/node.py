"""One node: what it keeps, and what that costs its quota owner. [compiled]

A node is a named namespace of semaphores and sessions (:class:`Node`). What it keeps
counts against its quota owner (:mod:`tenure._core.quotas`) by the rules here, each
stated once: a semaphore with its name and data (:func:`semaphore_bytes`), a key of
its annex with its value (:func:`annex_entry_bytes`), the node with its name and
annex (:meth:`Node.counted_bytes`). The engine's state keeps the nodes
(:class:`tenure._core.state.EngineState`).
"""

from __future__ import annotations

from dataclasses import field

from tenure._core._dataclass import dataclass
from tenure._core.claims import ClaimTimer
from tenure._core.quotas import Q_DATA_BYTES, Q_SEMAPHORES, Usage, text_bytes
from tenure._core.semaphore import Semaphore
from tenure._core.sorted_keys import SortedKeys
from tenure._core.values import NodeConfig


@dataclass(slots=True)
class Node:
    """A named namespace of semaphores and sessions.

    ``annex`` holds opaque bytes under short keys that a face keeps with the
    node (SetNodeAnnex, GetNodeAnnex): None until the first key is set, so that a
    node nobody annotates costs no dict.

    ``sets`` holds the all-or-none sets queued (AcquireAll): by their
    arrival number (the ``order`` every member waiter shares), each member's
    semaphore name and holder key. A member is granted only with all the others,
    and leaves its queue only with them (:func:`tenure._core.shared_steps.settle`,
    :func:`~tenure._core.shared_steps.withdraw_set`).

    ``claims`` holds the live claims by semaphore name (their records are the
    semaphores' data; :mod:`tenure._core.claims`): when each ends, on the engine's
    clock. Empty on most nodes.

    ``semaphore_index`` and ``session_index`` keep the keys of ``semaphores`` and
    ``sessions`` sorted, for listings (:mod:`tenure._core.sorted_keys`): a
    semaphore is added and removed with :meth:`add_semaphore` and
    :meth:`drop_semaphore`, a session with :meth:`add_session` and
    :meth:`drop_session`.
    """

    name: str
    config: NodeConfig
    semaphores: dict[str, Semaphore] = field(default_factory=dict)
    sessions: set[int] = field(default_factory=set)
    annex: dict[str, bytes] | None = None
    sets: dict[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    claims: dict[str, ClaimTimer] = field(default_factory=dict)
    semaphore_index: SortedKeys[str] = field(default_factory=SortedKeys)
    session_index: SortedKeys[int] = field(default_factory=SortedKeys)
    #: Its owner's usage (:mod:`tenure._core.quotas`; None: counted nowhere): the node
    #: counts there from :meth:`~tenure._core.state.EngineState.add_node` on, with its
    #: annex's bytes.
    usage: Usage | None = None
    #: Grants made on it (fencing tokens given: holds and claims) since this engine
    #: made or loaded it, and when the latest was (engine time; None: none yet). Not
    #: state (a snapshot keeps neither, a replay counts again): what the dashboard
    #: reads a node's recent grants from.
    grants: int = 0
    granted_at: float | None = None

    def add_semaphore(self, sem: Semaphore) -> Semaphore:
        """Keep ``sem`` (a new name) on the node, and its name in the index; it counts
        against its owner (its ``usage``) with its data from now on."""
        self.semaphores[sem.name] = sem
        self.semaphore_index.add(sem.name)
        usage = sem.usage  # (read once: a property)
        if usage is not None and usage.live:  # (else no call: counted nowhere)
            _count_semaphore(sem, 1)
        return sem

    def drop_semaphore(self, name: str) -> None:
        """Forget the semaphore ``name`` (it is there), and its name in the index."""
        sem = self.semaphores.pop(name)
        self.semaphore_index.discard(name)
        if not sem.is_idle():  # (a forced delete, a dropped node)
            sem.forget_holders_data()
        usage = sem.usage  # (read once: a property)
        if usage is not None and usage.live:  # (else no call: counted nowhere)
            _count_semaphore(sem, -1)

    def hand_over(self, sem: Semaphore, usage: Usage | None) -> None:
        """``sem`` (kept here) counts against ``usage``'s owner from now on, all that
        :func:`_count_semaphore` counts of it, and no longer against its owner until now
        (a claim takes over an ended claim's semaphore:
        :func:`tenure._core.handlers.claims.claim_name`)."""
        if sem.usage is not usage:
            _count_semaphore(sem, -1)
            sem.usage = usage
            _count_semaphore(sem, 1)

    def uncount_semaphores(self) -> None:
        """Its semaphores (and their holders' data) count against nobody any more: the
        node is dropped with them (one pass, no index kept up meanwhile)."""
        for sem in self.semaphores.values():
            if not sem.is_idle():
                sem.forget_holders_data()
            _count_semaphore(sem, -1)
            sem.usage = None

    def annex_bytes(self) -> int:
        """The bytes of its annex's keys and values (what its owner's ``data_bytes``
        counts of it: :func:`annex_entry_bytes` each)."""
        if not self.annex:
            return 0
        return sum(annex_entry_bytes(key, value) for key, value in self.annex.items())

    def counted_bytes(self) -> int:
        """What it counts in its owner's ``data_bytes``: its name and its annex's keys
        and values."""
        return text_bytes(self.name) + self.annex_bytes()

    def add_session(self, session_id: int) -> None:
        """Count the session ``session_id`` as the node's."""
        self.sessions.add(session_id)
        self.session_index.add(session_id)

    def drop_session(self, session_id: int) -> None:
        """The session ``session_id`` is no longer the node's."""
        self.sessions.discard(session_id)
        self.session_index.discard(session_id)

    def rebuild_indexes(self) -> None:
        """Sort the indexes afresh from the dicts (after a snapshot filled them)."""
        self.semaphore_index = SortedKeys(self.semaphores)
        self.session_index = SortedKeys(self.sessions)


def annex_entry_bytes(key: str, value: bytes) -> int:
    """What one key of a node's annex counts in the node's owner's ``data_bytes``: the
    key as a name is counted (:func:`text_bytes`, at most 64 bytes of UTF-8), and
    its value."""
    return text_bytes(key) + len(value)


def _count_semaphore(sem: Semaphore, sign: int) -> None:
    """Count ``sem`` with its name and data (:func:`semaphore_bytes`) once more (``sign``
    1) or once less (-1) against its owner (:mod:`tenure._core.quotas`): what a
    semaphore costs its owner, in one place."""
    usage = sem.usage
    if usage is not None and usage.live:
        usage.add(Q_SEMAPHORES, sign)
        usage.add(Q_DATA_BYTES, sign * semaphore_bytes(sem))


def semaphore_bytes(sem: Semaphore) -> int:
    """What ``sem`` counts in its owner's ``data_bytes``: its name and its data."""
    return text_bytes(sem.name) + len(sem.data)
