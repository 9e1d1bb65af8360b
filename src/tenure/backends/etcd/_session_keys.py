"""Where one etcd session's keys are: its semaphores' ranges, its requests' suffixes.

Every acquire and release spells them, so they are computed once per session: the
node's semaphores' range, and the session's part of its requests' keys (its lease
id). The layout itself is :mod:`._keys`'s.
"""

from __future__ import annotations

from tenure.backends.etcd._keys import Layout, name_part

__all__ = ["SessionKeys"]


class SessionKeys:
    """The keys of the session on lease ``lease_id`` in ``node`` (module docstring)."""

    __slots__ = ("_sid", "layout", "lease_id", "node", "root")

    def __init__(self, layout: Layout, node: str, lease_id: int) -> None:
        #: Where every key is.
        self.layout = layout
        self.node = node
        #: The session's lease: its id, and what its keys are put on.
        self.lease_id = lease_id
        #: The range of every semaphore's keys in the node.
        self.root = layout.semaphores(node)
        self._sid = f"{lease_id:016x}-".encode()

    def prefix(self, name: str) -> bytes:
        """The range of semaphore ``name``'s keys: record, queue, grants
        (:meth:`Layout.semaphore`)."""
        return self.root + name_part(name)

    def suffix(self, hold: int, upgrade: bool = False) -> bytes:
        """The last part of hold ``hold``'s request key, and its grant's
        (:func:`._keys.entry_suffix`)."""
        return self._sid + (b"%08x+" if upgrade else b"%08x") % hold
