"""A lock_all's set on etcd: its members, where their keys are, how far it got, and the
Txns that join every member's queue at once (the rules: :mod:`._set`; the wait:
:mod:`._set_wait`)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Final

from tenure._core.values import MAX_SET_NAMES
from tenure._etcd.requests import (
    EQUAL,
    LESS,
    add_compare_create,
    add_compare_mod,
    add_compare_range,
    add_delete,
    add_get,
    add_get_prefix,
    add_put,
    prefix_end,
)
from tenure.backends._base import Grant
from tenure.backends._ledger import Pending
from tenure.backends.etcd._keys import encode
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._queue import SemState
from tenure.errors import InvalidArgumentError

__all__ = ["MAX_TXN_OPS", "AllOrNoneSet", "check_members", "parse_states"]

#: etcd's --max-txn-ops by default: the most compares, and ops of each branch, of a Txn.
MAX_TXN_OPS: Final = 128


@dataclass(eq=False)
class AllOrNoneSet:
    """One lock_all of a session: its members (one pending acquire per name, in the
    names' order), where their keys are, and how far it got."""

    pendings: list[Pending]
    prefixes: list[bytes]
    suffixes: list[bytes]
    #: The members' create_revision (the set's arrival), once made; 0 before.
    created: int = 0
    #: Members whose placeholder was put, by index (:mod:`._set`).
    placed: set[int] = field(default_factory=set)
    #: The members' semaphores as read after they joined, at ``since`` or later.
    states: list[SemState] = field(default_factory=list)
    since: int = 0
    #: The wait's end, once over: a grant per member, None (busy), or the error.
    outcome: list[Grant] | BaseException | None = None
    waited: bool = False
    #: The withdrawal the members' withdrawals share (one Txn for all).
    withdrawal: asyncio.Future[list[Grant | None]] | None = None

    @property
    def names(self) -> list[str]:
        """The members' semaphores, in the names' order."""
        return [pending.name for pending in self.pendings]

    def index(self, pending: Pending) -> int:
        """Which member ``pending`` is."""
        return next(i for i, member in enumerate(self.pendings) if member is pending)

    def request(self, i: int) -> bytes:
        """Member ``i``'s request key."""
        return self.prefixes[i] + b"q/" + self.suffixes[i]

    def grant_key(self, i: int) -> bytes:
        """Member ``i``'s grant key."""
        return self.prefixes[i] + b"g/" + self.suffixes[i]

    def placeholder(self, i: int) -> bytes:
        """Member ``i``'s placeholder key (:mod:`._set`)."""
        return self.prefixes[i] + b"p/" + self.suffixes[i]

    def grant(self, i: int, token: int) -> Grant:
        """Member ``i``'s grant of token ``token``."""
        pending = self.pendings[i]
        return Grant(token, pending.count, None, pending.hold)

    def _values(self, data: bytes, at_once: bool) -> list[bytes]:
        """Each member's request value: the first granted by its Txn if ``at_once``."""
        first, now, n = self.pendings[0], time.time(), len(self.pendings)
        # "grp": the set's size under the set's old name, kept for the keys written with it.
        value = {"count": first.count, "data": data, "at": now, "grp": n}
        rest = encode(value)
        return [encode({**value, "g": True}) if at_once else rest, *[rest] * (n - 1)]

    def at_once_txn(
        self, request: Any, states: list[SemState], data: bytes, view: NodeView, lease: int
    ) -> bool:
        """Make ``request`` (the session's, :meth:`TxnSender.new_txn`) the Txn that grants
        the set at once if nobody joined any queue since ``states`` were read
        (:mod:`._set`); False if it needs more compares than etcd allows."""
        compare = request.compare
        add_compare_mod(compare, view.config_key, view.config_rev)
        for prefix, state in zip(self.prefixes, states, strict=True):
            queue = prefix + b"q/"
            if state.record and not state.entries:  # the record alone, still
                add_compare_range(compare, queue, prefix + b"rec\0", EQUAL, state.record)
                continue
            if state.record:
                add_compare_create(compare, prefix + b"rec", state.record)
            add_compare_range(compare, queue, prefix_end(prefix), LESS, state.revision + 1)
        if len(compare) > MAX_TXN_OPS:
            return False
        for i, value in enumerate(self._values(data, True)):
            add_put(request.success, self.request(i), value, lease)
        self._finish_txn(request, view)
        return True

    def queue_txn(
        self, request: Any, states: list[SemState], data: bytes, view: NodeView, lease: int
    ) -> None:
        """Make ``request`` the Txn that queues the set (:mod:`._set`); the caller adds the
        read-back."""
        compare = request.compare
        add_compare_mod(compare, view.config_key, view.config_rev)
        for prefix, state in zip(self.prefixes, states, strict=True):
            if state.record:
                add_compare_create(compare, prefix + b"rec", state.record)
        add_compare_create(compare, self.request(0), 0)
        for i, value in enumerate(self._values(data, False)):
            add_put(request.success, self.request(i), value, lease)
        self._finish_txn(request, view)

    def _finish_txn(self, request: Any, view: NodeView) -> None:
        """A joining Txn's last ops: the placeholders go; failing, every name is read."""
        for i in sorted(self.placed):
            add_delete(request.success, self.placeholder(i))
        add_get(request.failure, view.config_key)
        for prefix in self.prefixes:
            add_get_prefix(request.failure, prefix)


def check_members(pendings: list[Pending]) -> None:
    """1 to MAX_SET_NAMES pending acquires, of distinct names (the engine's check)."""
    names = [pending.name for pending in pendings]
    if not 1 <= len(names) <= MAX_SET_NAMES:
        raise InvalidArgumentError(f"names must be 1 to {MAX_SET_NAMES} semaphore names")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"names must be distinct, got {names!r:.80}")


def parse_states(lock_set: AllOrNoneSet, responses: list[Any], revision: int) -> list[SemState]:
    """The members' semaphores from one range response each (in the members' order)."""
    return [
        SemState.parse(name, prefix, response.response_range.kvs, revision)
        for name, prefix, response in zip(lock_set.names, lock_set.prefixes, responses, strict=True)
    ]
