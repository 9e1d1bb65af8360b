"""Acquire and restate on etcd: one Txn to join the queue, granted at once if it fits.

An acquire assumes what it last saw of the semaphore (nothing queued; its record,
if this client has seen one: :class:`~tenure.backends.etcd._hints.Hints`) and the
node's settings from the client's view of the node (:mod:`._node`), and **sends
one Txn** that compares exactly those assumptions, and the session's ``seq``:

* **success** (nobody queued, or nobody joined since the state it read and the
  request fits at the tail): put the request ``q/<sid>-<hold>`` (on the session's
  lease), saying it is granted: one key. **The fencing token is that Txn's
  revision** (the key's create_revision): global to the cluster, persisted, and
  greater than every earlier grant's.
* **failure**: a nested Txn (etcd >= 3.3) enqueues the request (comparing the
  same settings, record and ``seq``) and reads the semaphore back; if that fails
  too, it reads the settings and the semaphore, and the acquire checks again
  against what it read and sends again. The nested enqueue is sent only where
  this client has seen a queue (a name it found contended, or a state it read):
  an uncontended acquire's Txn stays small, in the Raft log too.

So an uncontended acquire is one round trip, and a contended one joins the queue
in one. The uncontended one (:meth:`SingleAcquirer._at_once`) is built in one go, with
three compares: the session's record, the settings' mod_revision, and nothing
under the semaphore at all (one range compare: no record, nobody queued), or, for
a persistent semaphore, its record's create_revision and an empty queue (four).
A client's joins of one semaphore take turns (:mod:`._turns`). Waiting, granting
in turn, timeouts and withdrawing are the :class:`~tenure.backends.etcd._wait.SingleWaiter`'s.

**Checks** (what the engine refuses, etcd:// refuses): a count above the limit,
data above ``max_data_size``, a full queue (``max_waiters``, checked on the state
read and again on the read-back, withdrawing a request that joined past it), a
new semaphore past ``max_semaphores`` (undone after the Txn when a count says so;
the count runs only when the view's bound does not prove the limit kept). A
refusal decided on the view is confirmed on the settings read now.

**Restate**: no more tokens (or new data) rewrites the request key in place (a
put keeps its create_revision and the grant key is untouched: same place, same
token). More tokens enqueue a second request for the hold (the key marked ``+``,
or unmarked if the hold's current one is marked): when admitted, its grant Txn
also deletes the hold's old request and grant, so it replaces the hold with a new
token; if it times out or is cancelled, only the new request goes.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from tenure._core.values import MAX_COUNT, check_data
from tenure._etcd.requests import (
    EQUAL,
    MOD,
    add_compare_create,
    add_compare_created_before,
    add_compare_mod,
    add_delete,
    add_get,
    add_get_prefix,
    add_put,
    compare_create,
    put,
)
from tenure.backends._base import Grant
from tenure.backends._ledger import Pending
from tenure.backends._store import QUEUED, Enqueued, SessionView, Withdrawal
from tenure.backends._turns import Turns
from tenure.backends.etcd._hints import Hints
from tenure.backends.etcd._holds import Holds
from tenure.backends.etcd._keys import encode
from tenure.backends.etcd._node import NodeView
from tenure.backends.etcd._queue import QueueEntry, SemState, too_many_waiters
from tenure.backends.etcd._record import SessionRecord
from tenure.backends.etcd._session_keys import SessionKeys
from tenure.backends.etcd._txns import TxnSender
from tenure.backends.etcd._wait import SingleWaiter
from tenure.errors import LimitExceededError, NotFoundError

__all__ = ["SingleAcquirer"]


class _Queued(NamedTuple):
    """A request that joined the queue: the state it read, its key's suffix, and the
    hold's own entry it upgrades (None for a new hold)."""

    state: SemState
    suffix: bytes
    old: QueueEntry | None


class SingleAcquirer:
    """Enqueue, wait and withdraw the single acquires of one session on etcd (module
    docstring); a lock_all's set is :class:`~tenure.backends.etcd._set.SetAcquirer`'s.

    Given the session's keys, Txns and record (its fence: a nested Txn compares it), the
    client's view, hints and turns, the session's :class:`SingleWaiter` and :class:`Holds`
    (a semaphore made past the limit goes); once bound, the session (its ledger).
    """

    def __init__(
        self,
        keys: SessionKeys,
        sender: TxnSender,
        record: SessionRecord,
        view: NodeView,
        hints: Hints,
        turns: Turns[bytes],
        waiter: SingleWaiter,
        holds: Holds,
    ) -> None:
        self._keys, self._sender, self._record, self._view = keys, sender, record, view
        self._hints, self._turns, self._waiter, self._holds = hints, turns, waiter, holds
        self._session: SessionView

    def bind(self, session: SessionView) -> None:
        """The session whose acquires these are, and its waiter's (:meth:`EtcdStore.bind`)."""
        self._session = session
        self._waiter.bind(session)

    async def enqueue(self, pending: Pending) -> Enqueued:
        """The one Txn that joins the queue, granted at once when the request fits."""
        prefix = self._keys.prefix(pending.name)
        turns = self._turns
        turn = turns.take(prefix)
        if turn is not None:
            await turns.wait(prefix, turn)
        try:
            name, hints = pending.name, self._hints
            known = hints.record(self._keys.node, name)
            raced = None
            if (
                (known is not None or pending.ephemeral)
                and not hints.is_contended(self._keys.node, name)
                and pending.place not in self._session.ledger.held
            ):
                raced = await self._at_once(pending, prefix, known)
            if isinstance(raced, Grant):
                found: Grant | _Queued | None = raced
            else:
                found = await self._join(pending, prefix, raced)
        finally:
            turns.give(prefix)
        if not isinstance(found, _Queued):
            return found
        pending.state = found
        return QUEUED

    async def await_grant(self, pending: Pending) -> Grant | None:
        """Wait for admission, then commit the grant (:class:`SingleWaiter`)."""
        queued = pending.state
        assert isinstance(queued, _Queued)
        return await self._waiter.wait(pending, queued.state, queued.suffix, queued.old)

    async def withdraw(self, pending: Pending) -> Grant | Withdrawal:
        """Withdraw what reached etcd of ``pending`` (maybe nothing: its Txn's answer may
        be lost), unless it was granted: then the grant (the session decides its fate)."""
        grant = await self._waiter.withdraw_request(pending.name, pending.hold)
        return Withdrawal.WITHDRAWN if grant is None else grant

    async def _join(
        self, pending: Pending, prefix: bytes, raced: SemState | None
    ) -> Grant | _Queued | None:
        """Check and enqueue (granting at once when it fits): a grant, or what to wait for.

        ``raced``: the state read by :meth:`_at_once`'s Txn, which failed (None: it was
        not sent, or declined).
        """
        name, hold, count, data = pending.name, pending.hold, pending.count, pending.data
        timeout, ephemeral = pending.timeout, pending.ephemeral
        restating = pending.place in self._session.ledger.held
        hints, sender = self._hints, self._sender
        queue, record = prefix + b"q/", prefix + b"rec"
        config_key = self._view.config_key
        known = hints.record(self._keys.node, name)
        if raced is not None:
            state = raced
        elif restating or (known is None and not ephemeral):
            state = await sender.read(name)
        else:  # a guess (revision 0): the Txn compares it, and its failure reads the truth
            created, limit = known or (0, MAX_COUNT)
            state = SemState(name, 0, record=created, limit=limit)
        fresh = False  # the settings were read for this acquire (not the view's)
        while True:
            config = self._view.config
            try:
                data = check_data("owner data", data, config.max_data_size)
            except LimitExceededError:
                if fresh:
                    raise
                await sender.config()  # the view may lag a change: refuse on the settings now
                fresh = True
                continue
            # When the request is made, by this client's clock (etcd has none to offer).
            now = time.time()
            value = encode({"count": count, "data": data, "at": now})
            guess = state.revision == 0
            old = None
            if guess:
                if count > state.limit:
                    state = await sender.read(name)
                    continue
            else:
                hints.remember(self._keys.node, state)
                if not state.exists and not ephemeral:
                    raise NotFoundError(
                        f"semaphore {name!r} does not exist (create it or use ephemeral)"
                    )
                if state.exists and count > state.limit:
                    raise LimitExceededError(
                        f"count {count} exceeds the limit {state.limit} of {name!r}"
                    )
                old = state.held((self._keys.lease_id, hold)) if restating else None
                if old is not None and count <= old.count:
                    # Restate in place: same key (a put keeps its create_revision), same
                    # grant, same times.
                    kept: dict[str, object] = {"count": count, "data": data}
                    if old.at is not None:
                        kept["at"] = old.at
                    if old.at_once:
                        kept["g"] = True
                    value = encode(kept)
                    key = queue + old.suffix
                    reply = await sender.txn(
                        [compare_create(key, old.created)],
                        [put(key, value, self._keys.lease_id)],
                        [],
                    )
                    if reply.succeeded:
                        return Grant(old.granted, count, None, hold)
                    state = await sender.read(name)
                    continue
            suffix = self._keys.suffix(hold, old is not None and not old.upgrade)
            existing = None if guess else state.entry(suffix)
            if existing is not None:  # an enqueue of ours whose answer was lost: resume it
                return _Queued(state, existing.suffix, old)
            if timeout != 0 and len(state.waiters()) >= config.max_waiters:
                if not fresh:
                    await sender.config()
                    fresh = True
                    continue
                raise too_many_waiters(config.max_waiters, name)
            creating = not state.exists
            request = sender.new_txn()
            # Both Txns compare the session's seq (the nested one too: the outer one's
            # failure may be its), the settings the view holds and the record; then the
            # enqueue puts the request and reads the semaphore back.
            config_rev = self._view.config_rev
            if state.fits_at_tail(count, old):
                # Granted at once if nobody joined since the state read (or, for a guess,
                # nobody is queued at all), in the same Txn as the request: one round trip.
                # Else, where this client has seen a queue (a state read, or the name's
                # last acquire), the nested Txn enqueues: still one round trip; a guess
                # about a name not known to be contended reads instead (a nested Txn
                # costs every uncontended acquire its bytes, in the Raft log too).
                nest = not guess or hints.is_contended(self._keys.node, name)
                _assumptions(request.compare, config_key, config_rev, record, state.record)
                add_compare_created_before(request.compare, queue, state.revision + 1)
                # The request says it is granted: one key, whose create_revision (this
                # Txn's revision) is the token, as a grant key's would be.
                granted_value = encode({"count": count, "data": data, "g": True, "at": now})
                add_put(request.success, queue + suffix, granted_value, self._keys.lease_id)
                if old is not None:  # an upgrade replaces the hold: its old keys go
                    add_delete(request.success, queue + old.suffix)
                    add_delete(request.success, prefix + b"g/" + old.suffix)
                if nest:
                    nested = request.failure.add().request_txn
                    add_compare_mod(nested.compare, self._record.key, self._record.seq_rev)
                    self._enqueue(nested, prefix, suffix, value, config_rev, state.record)
                else:
                    add_get(request.failure, config_key)
                    add_get_prefix(request.failure, prefix)
                reply = await sender.send(request)
                revision = int(reply.header.revision)
                if reply.succeeded:
                    if guess:
                        hints.contended(self._keys.node, name, False)
                    if creating:
                        await self._check_semaphores(name, hold, revision)
                    return Grant(revision, count, None, hold)
                if nest:
                    outcome = reply.responses[1].response_txn
                    read = list(outcome.responses)
                else:
                    outcome, read = reply, list(reply.responses)[1:]  # the sender's read first
            else:
                self._enqueue(request, prefix, suffix, value, config_rev, state.record)
                outcome = await sender.send(request)
                revision = int(outcome.header.revision)
                read = list(outcome.responses)[
                    0 if outcome.succeeded else 1 :
                ]  # the sender's read first
            if not outcome.succeeded:  # raced with a change: the settings and the state, read
                state = await self._raced(name, prefix, read, revision)
                continue
            state = SemState.parse(name, prefix, read[1].response_range.kvs, revision)
            hints.contended(self._keys.node, name, True)
            mine = state.entry(suffix)
            if mine is not None and timeout != 0 and not mine.granted:
                ahead = [e for e in state.waiters() if e.created < mine.created]
                if len(ahead) >= config.max_waiters:  # others joined meanwhile: withdraw
                    await self._waiter.withdraw(name, suffix)
                    raise too_many_waiters(config.max_waiters, name)
            return _Queued(state, suffix, old)

    async def _at_once(
        self, pending: Pending, prefix: bytes, known: tuple[int, int] | None
    ) -> Grant | SemState | None:
        """The uncontended acquire: one Txn, granted if nobody is queued (module docstring).

        What :meth:`_join`'s loop sends first for a guess (``known``: the record last
        seen, if any) about a name not known to be contended, and no restate, built in
        one go: the grant, or the state its failure read (None: not a case for it; the
        loop decides). Without the loop's checks, each of which such a guess passes or
        sends it to the loop: the data fits (else the settings are read there), the
        count fits the limit last seen, nobody is queued (so no queue is full and the
        request fits at the tail).
        """
        view, data, count = self._view, pending.data, pending.count
        record, limit = known or (0, MAX_COUNT)
        if type(data) is not bytes or len(data) > view.config.max_data_size or count > limit:
            return None
        request = self._sender.new_txn()
        compare = request.compare
        compare.add(key=view.config_key, target=MOD, result=EQUAL, mod_revision=view.config_rev)
        if record:
            add_compare_create(compare, prefix + b"rec", record)
            add_compare_created_before(compare, prefix + b"q/", 1)
        else:
            # No record and nobody queued: nothing at all under the semaphore, one compare
            # (a range compare holds for an empty range; any key has a create_revision >= 1).
            add_compare_created_before(compare, prefix, 1)
        put = request.success.add().request_put
        put.key = prefix + b"q/" + self._keys.suffix(pending.hold)
        put.value = encode({"count": count, "data": data, "g": True, "at": time.time()})
        put.lease = self._keys.lease_id
        failure = request.failure
        failure.add().request_range.key = view.config_key
        add_get_prefix(failure, prefix)
        reply = await self._sender.send(request)
        revision = int(reply.header.revision)
        if not reply.succeeded:
            return await self._raced(pending.name, prefix, list(reply.responses)[1:], revision)
        if not record:  # a new semaphore: count them, unless the bound proves it kept
            bound = view.semaphores_bound(revision)
            if bound is None or bound > view.config.max_semaphores:
                await self._check_semaphores(pending.name, pending.hold, revision)
        return Grant(revision, count, None, pending.hold)

    async def _raced(self, name: str, prefix: bytes, read: list[Any], revision: int) -> SemState:
        """A join's Txn failed on what it assumed: take the settings and the state it read
        (the node's settings' key, then the semaphore's range) instead."""
        config_kvs = read[0].response_range.kvs
        if not config_kvs:
            await self._record.ensure_alive()
            raise NotFoundError(f"node {self._keys.node!r} does not exist")
        self._view.update(config_kvs[0])
        state = SemState.parse(name, prefix, read[1].response_range.kvs, revision)
        self._hints.contended(self._keys.node, name, bool(state.entries))
        return state

    async def _check_semaphores(self, name: str, hold: int, revision: int) -> None:
        """After creating ``name`` at ``revision``: undo it if the node has too many semaphores.

        Counted only when the view's bound (:meth:`NodeView.semaphores_bound`) does not
        prove the limit kept. Two creators racing past the limit both undo: never one
        too many.
        """
        limit = self._view.config.max_semaphores
        bound = self._view.semaphores_bound(revision)
        if bound is not None and bound <= limit:
            return
        if await self._sender.count_semaphores() <= limit:
            return
        await self._holds.drop(name, hold)
        raise LimitExceededError(f"max_semaphores ({limit}) reached on node {self._keys.node!r}")

    def _enqueue(
        self,
        request: Any,
        prefix: bytes,
        suffix: bytes,
        value: bytes,
        config_rev: int,
        record_rev: int,
    ) -> None:
        """Make ``request`` the enqueue Txn: put the request and read the semaphore back
        (failing: read the node's settings and the semaphore)."""
        key, config_key = prefix + b"q/" + suffix, self._view.config_key
        _assumptions(request.compare, config_key, config_rev, prefix + b"rec", record_rev)
        add_compare_create(request.compare, key, 0)
        add_put(request.success, key, value, self._keys.lease_id)
        add_get_prefix(request.success, prefix)
        add_get(request.failure, config_key)
        add_get_prefix(request.failure, prefix)


def _assumptions(
    compares: Any, config_key: bytes, config_rev: int, record: bytes, record_rev: int
) -> None:
    """What an acquire assumed: the node's settings it checked, the record it read."""
    add_compare_mod(compares, config_key, config_rev)
    add_compare_create(compares, record, record_rev)
