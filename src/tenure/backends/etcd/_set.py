"""All-or-none acquires (``lock_all``) on etcd: a request in every name's queue, one arrival.

The engine's AcquireAll (:mod:`tenure._core.handlers.sets`) restated with Txns.
A set of N names (2 or more: one name is a plain acquire, as on the engine) makes
one request per name, ``q/<sid>-<hold>``, **all in one Txn**: they share one
create_revision ``C``, the set's arrival, so every queue orders the set the same way
against every other request, and sets of overlapping names, asked for in any order,
never wait for each other in a circle. Each value says ``grp`` (how many names):
an ungranted member holds its queue back (:mod:`._queue`, which argues why
admission stays stable). The client's joins take the names' turns in name order
(:mod:`tenure.backends._turns`; two of its sets never wait for each other's turns).

**The joining Txn**, after the checks the engine makes, on what was read (or, for
a set of names this client has not seen contended, guessed: a wrong guess fails the
Txn, whose failure reads every name), in its order: each name exists (unless
ephemeral) and its limit takes the count (NotFoundError, LimitExceededError), then
max_semaphores, then max_waiters (only to queue), then BUSY (timeout 0):

* **at once**, if every name would grant now (nobody waits, the count fits):
  compares, per name, that nobody joined since the read (every key of its queue
  and record older than the read: one range compare; for a persistent one, its
  record too, or one range compare that only the record is there). It puts every
  request, **the first granted by that Txn** (``g``: its token is ``C``); the
  others' grants follow at once, one Txn each (:meth:`._set_wait.SetWaiter.finish`):
  each grant needs a revision of its own, for tokens ascending in the names' order.
  That is N Txns for N names, where the engine takes one step.
* **queued**: compares each persistent name's record (as the single enqueue does)
  and that the first request is not there yet (the one Txn that is not safe to
  send twice: sent again after a lost answer, it fails and its reads find the
  requests, which are taken as made). The requests are read back (in the same Txn
  while etcd's 128 ops allow it, else right after); what changed since the read is
  checked there: a record made meanwhile whose limit the count exceeds
  (LimitExceededError), a queue filled past max_waiters (withdrawn, refused).
  :mod:`._set_wait` waits.

**Placeholders, and max_semaphores.** A client skips counting the node's
semaphores after it made one while its bound proves the limit kept
(:meth:`._node.NodeView.semaphores_bound`), a bound that holds only if no Txn makes
two semaphores. A set's Txn makes at most one: before it, each name without a
record but the first gets a **placeholder** ``p/<sid>-<hold>`` of its own (one Txn
each, sent together, each counted after as any maker of a semaphore counts), which
keeps the name counted (every key under a name counts) until the joining Txn
deletes it: a placeholder goes only with its session or by its own set (a delete
of the semaphore leaves it, :mod:`._admin`), so the Txn, which compares the
session, need not compare it. Nothing reads a placeholder as a request: it never
holds a queue back. A name that exists with a record cannot vanish under the Txn
(it compares the record), so at most the one name left without a placeholder is
made by it.

**Budgets.** etcd allows 128 compares and 128 ops a branch by default
(``--max-txn-ops``): for 64 names, the queued Txn has at most 67 compares and 127
ops plus the read-back when it fits; the at-once one takes two compares for a
persistent name that has holders, and where that is more than 128 in all, the set
is queued instead (and granted by its wait at once). Each request carries the
owner data: N times the data must fit etcd's ``--max-request-bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from tenure._core.values import MAX_COUNT, check_data
from tenure._etcd.client import EtcdClient
from tenure._etcd.requests import (
    add_get,
    add_get_prefix,
    add_put,
    get,
    get_prefix,
)
from tenure.backends._base import Grant
from tenure.backends._ledger import Pending
from tenure.backends._store import QUEUED, InQueue
from tenure.backends._turns import Turns
from tenure.backends.etcd._hints import Hints
from tenure.backends.etcd._lock_set import MAX_TXN_OPS, AllOrNoneSet, parse_states
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._queue import SemState, too_many_waiters
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._set_wait import SetWaiter
from tenure.backends.etcd._txns import TxnSender
from tenure.errors import (
    LimitExceededError,
    LostError,
    NotFoundError,
    TenureError,
    UnavailableError,
)

__all__ = ["SetAcquirer"]


class SetAcquirer:
    """Joins the queues of a lock_all's names for one session (module docstring): given
    the session's keys, Txns and record, the client's view, hints, turns and channel,
    and the session's :class:`SetWaiter`."""

    def __init__(
        self,
        keys: SessionKeys,
        sender: TxnSender,
        record: SessionRecord,
        view: NodeView,
        hints: Hints,
        turns: Turns[bytes],
        conn: EtcdClient,
        waiter: SetWaiter,
    ) -> None:
        self._keys, self._sender, self._record, self._view = keys, sender, record, view
        self._hints, self._turns, self._conn, self._waiter = hints, turns, conn, waiter

    async def enqueue_all(self, pendings: list[Pending]) -> list[Grant] | InQueue | None:
        """Grant every member now, queue them all, or None (busy, timeout 0).

        A refusal after something was written takes it back; a cancellation or an
        unanswered call leaves that to the session's withdrawal of each member,
        which finds the set in ``pending.state``.
        """
        lock_set = AllOrNoneSet(
            pendings,
            [self._keys.prefix(pending.name) for pending in pendings],
            [self._keys.suffix(pending.hold) for pending in pendings],
        )
        for pending in pendings:
            pending.state = lock_set
        turns, taken = self._turns, []
        try:
            try:
                for prefix in sorted(lock_set.prefixes):
                    turn = turns.take(prefix)
                    if turn is not None:
                        await turns.wait(prefix, turn)
                    taken.append(prefix)
                joined = await self._join(lock_set)
            finally:
                for prefix in taken:
                    turns.give(prefix)
            if isinstance(joined, Grant):  # the first granted with the join: the others now
                return await self._waiter.finish(lock_set, [joined])
            if joined is None and lock_set.placed:
                await self._waiter.abandon(lock_set)  # (busy: only the placeholders to take back)
            return joined
        except (UnavailableError, LostError):
            raise  # withdrawn by the session (or gone with it)
        except TenureError:
            with contextlib.suppress(TenureError):
                await self._waiter.abandon(lock_set)
            raise

    async def _join(self, lock_set: AllOrNoneSet) -> Grant | InQueue | None:
        """Check and join (module docstring): the first member's grant (the set was granted
        at once), QUEUED, or None (busy)."""
        first = lock_set.pendings[0]
        count, data, timeout = first.count, first.data, first.timeout
        lease = self._keys.lease_id
        states: list[SemState] | None = None
        if not self._may_guess(lock_set):
            states = await self._read(lock_set)
        fresh = False  # the settings were read for this join (not the view's)
        while True:
            config = self._view.config
            try:
                data = check_data("owner data", data, config.max_data_size)
            except LimitExceededError:
                if fresh:
                    raise
                await self._sender.config()  # the view may lag a change: refuse on the settings now
                fresh = True
                continue
            unplaced = self._guarded(lock_set, states) - lock_set.placed
            if unplaced:
                states = await self._place(lock_set, unplaced)
                continue
            if states is None:
                states = self._guesses(lock_set)
            mine = states[0].entry(lock_set.suffixes[0])
            if mine is not None:  # our join was made, its answer lost (sent again, it failed)
                return await self._made(lock_set, states, mine.created, bool(mine.granted))
            if not self._checked(lock_set, states):
                states = await self._read(lock_set)
                continue
            if not all(state.fits_at_tail(count) for state in states):
                if timeout == 0:
                    await self._room_to_refuse(lock_set, states)
                    return None
                full = [s.name for s in states if len(s.waiters()) >= config.max_waiters]
                if full:
                    if not fresh:
                        await self._sender.config()
                        fresh = True
                        continue
                    raise too_many_waiters(config.max_waiters, full[0])
                at_once = False
            else:  # (not at once: too many compares for one Txn; queued, granted by the wait)
                request = self._sender.new_txn()
                at_once = lock_set.at_once_txn(request, states, data, self._view, lease)
            reads = False
            if not at_once:
                request = self._sender.new_txn()
                lock_set.queue_txn(request, states, data, self._view, lease)
                reads = len(request.success) + len(states) <= MAX_TXN_OPS
                if reads:  # read back in the same Txn while the ops allow it
                    for prefix in lock_set.prefixes:
                        add_get_prefix(request.success, prefix)
            reply = await self._sender.send(request)
            revision = int(reply.header.revision)
            if not reply.succeeded:
                states = await self._parse_read(lock_set, list(reply.responses)[1:], revision)
                continue
            if not at_once:
                if reads:
                    states = parse_states(lock_set, list(reply.responses)[-len(states) :], revision)
                else:
                    states = await self._waiter.read(lock_set)
            return await self._made(lock_set, states, revision, at_once)

    async def _made(
        self, lock_set: AllOrNoneSet, states: list[SemState], created: int, at_once: bool
    ) -> Grant | InQueue:
        """The join was made at revision ``created``: check what it may have changed
        (a semaphore made; for a queued set, ``states`` read after it: limits and queues
        changed since the checks) and say what it was."""
        first = lock_set.pendings[0]
        lock_set.created = created
        lock_set.placed.clear()  # (the join deleted them)
        await self._room(states, created)
        if at_once:
            for name in lock_set.names:
                self._hints.contended(self._keys.node, name, False)
            return lock_set.grant(0, created)
        config = self._view.config
        for state, suffix in zip(states, lock_set.suffixes, strict=True):
            self._hints.contended(self._keys.node, state.name, True)
            mine = state.entry(suffix)
            if mine is None:
                continue  # gone already: the wait finds out
            if state.record and first.count > state.limit:  # a record made since the read
                raise _over_limit(first.count, state)
            ahead = [entry for entry in state.waiters() if entry.created < mine.created]
            if first.timeout != 0 and len(ahead) >= config.max_waiters:
                raise too_many_waiters(config.max_waiters, state.name)
        lock_set.states, lock_set.since = states, max(state.revision for state in states)
        return QUEUED

    def _may_guess(self, lock_set: AllOrNoneSet) -> bool:
        """Whether the join may start from guesses (the hints): an ephemeral set, none of
        whose names this client found contended when it last acquired it."""
        return lock_set.pendings[0].ephemeral and not any(
            self._hints.is_contended(self._keys.node, name) for name in lock_set.names
        )

    def _guesses(self, lock_set: AllOrNoneSet) -> list[SemState]:
        """Each name as guessed from the hints: its last record seen, nobody queued."""
        guesses = []
        for name in lock_set.names:
            created, limit = self._hints.record(self._keys.node, name) or (0, MAX_COUNT)
            guesses.append(SemState(name, 0, record=created, limit=limit))
        return guesses

    def _guarded(self, lock_set: AllOrNoneSet, states: list[SemState] | None) -> set[int]:
        """The members that need a placeholder: every name without a record (as read, or
        as the hints say) but the first (module docstring)."""
        if states is None:
            hints = self._hints
            open_ = [
                i for i, n in enumerate(lock_set.names) if hints.record(self._keys.node, n) is None
            ]
        else:
            open_ = [i for i, state in enumerate(states) if not state.record]
        return set(open_[1:])

    def _checked(self, lock_set: AllOrNoneSet, states: list[SemState]) -> bool:
        """The engine's checks of each name, in order (raises); False if a guess must be
        read first (a count above the limit last seen)."""
        first = lock_set.pendings[0]
        for state in states:
            if state.revision == 0:
                if first.count > state.limit:
                    return False
                continue
            self._hints.remember(self._keys.node, state)
            if not state.exists and not first.ephemeral:
                raise NotFoundError(
                    f"semaphore {state.name!r} does not exist (create it or use ephemeral)"
                )
            if state.exists and first.count > state.limit:
                raise _over_limit(first.count, state)
        return True

    async def _place(self, lock_set: AllOrNoneSet, indexes: set[int]) -> list[SemState]:
        """Put the placeholders of members ``indexes``, one Txn each (sent together), the
        last also reading every name; count the node's semaphores as any maker of one
        does (LimitExceededError past max_semaphores). The names as read."""
        order = sorted(indexes)
        lock_set.placed.update(order)  # (before: an unanswered one may have been made)

        async def put(i: int) -> Any:
            request = self._sender.new_txn()
            add_put(request.success, lock_set.placeholder(i), b"", self._keys.lease_id)
            if i == order[-1]:
                add_get(request.success, self._view.config_key)
                for prefix in lock_set.prefixes:
                    add_get_prefix(request.success, prefix)
            return await self._sender.send(request)

        replies = await asyncio.gather(*(put(i) for i in order))
        view, limit = self._view, self._view.config.max_semaphores
        bounds = [view.semaphores_bound(int(reply.header.revision)) for reply in replies]
        proven = all(bound is not None and bound <= limit for bound in bounds)
        if not proven and await self._sender.count_semaphores() > limit:
            raise LimitExceededError(
                f"max_semaphores ({limit}) reached on node {self._keys.node!r}"
            )
        last = replies[-1]
        return await self._parse_read(lock_set, list(last.responses)[1:], int(last.header.revision))

    async def _read(self, lock_set: AllOrNoneSet) -> list[SemState]:
        """The node's settings and every name, read now (one Txn)."""
        ops = [get(self._view.config_key), *(get_prefix(prefix) for prefix in lock_set.prefixes)]
        reply = await self._conn.txn([], ops)
        return await self._parse_read(lock_set, list(reply.responses), int(reply.header.revision))

    async def _parse_read(
        self, lock_set: AllOrNoneSet, responses: list[Any], revision: int
    ) -> list[SemState]:
        """The states from a read of the settings' key, then every name (the view takes
        the settings; no settings: the node is gone)."""
        config_kvs = responses[0].response_range.kvs
        if not config_kvs:
            await self._record.ensure_alive()
            raise NotFoundError(f"node {self._keys.node!r} does not exist")
        self._view.update(config_kvs[0])
        states = parse_states(lock_set, responses[1:], revision)
        for state in states:
            self._hints.contended(self._keys.node, state.name, bool(state.entries))
        return states

    async def _room(self, states: list[SemState], revision: int) -> None:
        """After the join at ``revision``: the one name without a placeholder or record
        may have been made by it; count as any maker does, unless the bound proves it."""
        if all(state.record for state in states):
            return
        limit = self._view.config.max_semaphores
        bound = self._view.semaphores_bound(revision)
        if bound is not None and bound <= limit:
            return
        if await self._sender.count_semaphores() > limit:
            raise LimitExceededError(
                f"max_semaphores ({limit}) reached on node {self._keys.node!r}"
            )

    async def _room_to_refuse(self, lock_set: AllOrNoneSet, states: list[SemState]) -> None:
        """Before a busy answer, the engine's check of max_semaphores: the names that do
        not exist (those with a placeholder are counted already) would not fit."""
        missing = sum(
            not state.exists and i not in lock_set.placed for i, state in enumerate(states)
        )
        if not missing:
            return
        limit = self._view.config.max_semaphores
        bound = self._view.semaphores_bound(max(state.revision for state in states))
        if bound is not None and bound + missing <= limit:
            return
        if await self._sender.count_semaphores() + missing > limit:
            raise LimitExceededError(
                f"max_semaphores ({limit}) reached on node {self._keys.node!r}"
            )


def _over_limit(count: int, state: SemState) -> LimitExceededError:
    return LimitExceededError(f"count {count} exceeds the limit {state.limit} of {state.name!r}")
