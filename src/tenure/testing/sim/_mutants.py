"""Mutants: tenure with one bug put back, to show that the simulation finds it.

Each mutant (``--mutant NAME``) patches one function of tenure for the length of a
run (:func:`planted`) and names what must catch it. The first two are bugs the fault
suite found in the client (tools/faults/findings.md), put back as they were; the
others are bugs of the kinds a coordination service must never have:

* ``resent-update`` (findings 4): the ``tenure://`` client sends an
  ``UpdateSemaphore`` again after the answer was lost, as if it were idempotent; it is
  applied again after other clients' updates. Caught by ``linearizable:register``.
* ``stalled-release`` (findings 3): a release made after the client's process stood
  still past its recovery window does not first give the session up: the release
  returns clean while the server had expired the session and granted the lock to
  another. Caught by ``linearizable:mutex``.
* ``token-reset``: the server forgets its fencing counter across a restart (it
  starts again from 0): a token not raised across a crash. Caught by
  ``linearizable:mutex`` (tokens strictly increase per name).
* ``lost-swap``: the server answers that a compare-and-set swapped, and does not
  change the data (one in five that should swap). Caught by
  ``linearizable:register`` and ``linearizable:counter``.
* ``early-claim-end``: a claim's release ends it at once, its ``at_least`` not
  waited for (a late replica finds the slot free and runs it again). Caught by
  ``claims:exclusive``.
* ``torn-record``: a journal whose last record was torn by a power loss keeps the torn
  record's part as a record (the torn tail not dropped), so the restart replays a
  record cut short. Caught by ``restart`` (the server must start from what a crash
  left) or a model.

And of a cluster (``--target cluster``):

* ``failover-token-reset``: a member that takes the lead forgets the fencing counter
  of the state it took over (from 0 again): a token not raised across a failover.
  Caught by ``linearizable:mutex``.
* ``unfenced-append``: a leader's append to the log puts its entry whatever is there:
  neither the fence (the Txn's compare on its candidacy) nor the compare that the
  entry's index is free. (The fence alone dropped is no bug: the index's compare keeps
  a deposed leader's late entries from landing anywhere but next.) A deposed leader's
  append held up on its way lands over its successor's entries. Caught by a model, or
  by ``no-progress`` (the members stuck on a log they cannot apply).

And of a service of two cells (``--target cells``), whose nemesis moves the workload's
node between them:

* ``unfrozen-move``: the source puts its copy of the node without freezing it first,
  and goes on serving it (nor, unfrozen, does it forget it once the target took it):
  two cells serve one node. Caught by ``cells`` (the node on both at the end) or a
  model.
* ``unraised-mark``: the target takes a node in without raising its fencing counter
  to the copy's mark: the tokens it grants after the move may be below those granted
  before. Caught by ``linearizable:mutex``.
:data:`MUTANT_TARGETS` says which targets each runs on (those its code runs in).

A patch of a module mypyc compiled does not take: the command line runs mutants on
tenure's pure build (:mod:`tenure.testing.sim._cli`).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from typing import Any, Final

__all__ = ["MUTANTS", "MUTANT_TARGETS", "planted"]

#: A patch: (a module, class or dict by its dotted path; the attribute or key; the new
#: value, made from the old one).
Patch = tuple[str, Any, Callable[[Any], Any]]


def _resent_update() -> list[Patch]:
    from tenure._core import UpdateSemaphore

    return [
        (
            "tenure.backends._remote_session",
            "_RESENDABLE",
            lambda resendable: (*resendable, UpdateSemaphore),
        )
    ]


def _stalled_release() -> list[Patch]:
    def deadline_passed(original: Callable[[Any], bool]) -> Callable[[Any], bool]:
        def passed(self: Any) -> bool:
            return bool(self._signal.ended)  # (the local deadline not asked first)

        return passed

    return [("tenure.client._session_holds.SessionHolds", "_deadline_passed", deadline_passed)]


def _token_reset() -> list[Patch]:
    def resume(original: Callable[..., Any]) -> Callable[..., Any]:
        def forgetting(self: Any, engine: Any, now: float) -> Any:
            found = original(self, engine, now)
            found.last_token = 0  # forgotten: not part of what survives a restart
            return found

        return forgetting

    return [("tenure.server._durability.journal.Journal", "resume", resume)]


def _lost_swap() -> list[Patch]:
    from tenure._core import commands as c

    counts: dict[str, int] = {}

    def swap(original: Callable[..., Any]) -> Callable[..., Any]:
        def losing(state: Any, cmd: Any, now: float) -> Any:
            _, node = state.lookup_session_node(cmd.session_id)
            semaphore = node.semaphores.get(cmd.name)
            if semaphore is not None and semaphore.data == cmd.expected:
                seen = counts[cmd.name] = counts.get(cmd.name, 0) + 1
                if seen % 5 == 1:
                    return True  # answered swapped; the data unchanged
            return original(state, cmd, now)

        return losing

    return [("tenure._core.engine._HANDLERS", c.SwapSemaphoreData, swap)]


def _early_claim_end() -> list[Patch]:
    from tenure._core import commands as c

    def release(original: Callable[..., Any]) -> Callable[..., Any]:
        def at_once(state: Any, cmd: Any, now: float) -> Any:
            timer = state.lookup_node(cmd.node).claims.get(cmd.name)
            if timer is not None:
                timer.least_until = min(timer.least_until, now)  # at_least forgotten
            return original(state, cmd, now)

        return at_once

    return [("tenure._core.engine._HANDLERS", c.ReleaseClaim, release)]


def _torn_record() -> list[Patch]:
    from tenure.server._durability import tails

    def read(original: Callable[..., Any]) -> Callable[..., Any]:
        def trusting(path: Any, limit: int, *, last: bool = False) -> Any:
            data = path.read_bytes()
            found = tails.scan(data, limit)
            if last and found.damage is not None and found.tail:
                torn = data[found.end + tails.HEAD.size :]  # its part taken as a record
                return [*found.records, torn] if torn else found.records, len(data)
            return original(path, limit, last=last)

        return trusting

    return [("tenure.server._durability.storage", "_read_records", read)]


def _failover_token_reset() -> list[Patch]:
    def resume(original: Callable[..., Any]) -> Callable[..., Any]:
        def forgetting(engine: Any, now: float) -> Any:
            found = original(engine, now)
            engine.last_token = 0  # forgotten at the takeover
            return found

        return forgetting

    return [("tenure.server._cluster.member", "resume", resume)]


def _unfenced_append() -> list[Patch]:
    from tenure._etcd.requests import put
    from tenure.server._cluster.keys import encode
    from tenure.server._cluster.store import APPEND_TIMEOUT, Appended

    def append(original: Callable[..., Any]) -> Callable[..., Any]:
        async def unfenced(self: Any, index: int, entry: Any, lease: int) -> Any:
            key, value = self.keys.entry(index), encode(entry)
            await self.conn.txn([], [put(key, value)], [], timeout=APPEND_TIMEOUT)
            return Appended.DONE

        return unfenced

    return [("tenure.server._cluster.store.ClusterStore", "append", append)]


def _unfrozen_move() -> list[Patch]:
    import msgspec

    from tenure._core.snapshot import dump_node
    from tenure.server._cluster.moves import MoveCopy, put_copy

    def leaving(original: Callable[..., Any]) -> Callable[..., Any]:
        async def unfrozen(self: Any, node: str, place: Any) -> None:
            if node not in self.host.engine.nodes:
                await original(self, node, place)
                return
            copy = msgspec.msgpack.encode(dump_node(self.host.engine, node))  # (not frozen)
            move = MoveCopy(place.cell, place.to, place.epoch, copy)
            await put_copy(self.directory.conn, self.directory.keys.move(node), move)

        return unfrozen

    return [("tenure.server._cluster.mover.NodeMover", "_leaving", leaving)]


def _unraised_mark() -> list[Patch]:
    def importing(original: Callable[..., Any]) -> Callable[..., Any]:
        def unraised(engine: Any, plain: Any, cell: str, now: float) -> Any:
            before = engine.last_token
            found = original(engine, plain, cell, now)
            engine.last_token = before  # (the copy's mark not taken)
            return found

        return unraised

    return [("tenure.server._durability.records", "import_moved_node", importing)]


#: Each mutant: what puts it in.
MUTANTS: Final[dict[str, Callable[[], list[Patch]]]] = {
    "resent-update": _resent_update,
    "stalled-release": _stalled_release,
    "token-reset": _token_reset,
    "lost-swap": _lost_swap,
    "early-claim-end": _early_claim_end,
    "torn-record": _torn_record,
    "failover-token-reset": _failover_token_reset,
    "unfenced-append": _unfenced_append,
    "unfrozen-move": _unfrozen_move,
    "unraised-mark": _unraised_mark,
}
#: The targets each mutant runs on (module docstring).
MUTANT_TARGETS: Final[dict[str, tuple[str, ...]]] = {
    "resent-update": ("server", "cluster"),
    "stalled-release": ("server", "cluster"),
    "token-reset": ("server",),
    "lost-swap": ("server", "cluster"),
    "early-claim-end": ("server", "cluster"),
    "torn-record": ("server",),
    "failover-token-reset": ("cluster",),
    "unfenced-append": ("cluster",),
    "unfrozen-move": ("cells",),
    "unraised-mark": ("cells",),
}


def _owner(path: str) -> Any:
    """The module, or the module's attribute, that ``path`` names (``a.b.C``)."""
    try:
        return importlib.import_module(path)
    except ImportError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


@contextlib.contextmanager
def planted(name: str | None) -> Iterator[None]:
    """Put mutant ``name`` in until the block ends (None: none)."""
    if name is None:
        yield
        return
    if name not in MUTANTS:
        raise ValueError(f"no mutant {name!r} (one of {', '.join(MUTANTS)})")
    undo: list[tuple[Any, Any, Any]] = []
    try:
        for path, attribute, make in MUTANTS[name]():
            owner = _owner(path)
            old = owner[attribute] if isinstance(owner, dict) else getattr(owner, attribute)
            undo.append((owner, attribute, old))
            _put(owner, attribute, make(old))
        yield
    finally:
        for owner, attribute, old in reversed(undo):
            _put(owner, attribute, old)


def _put(owner: Any, attribute: Any, value: Any) -> None:
    if isinstance(owner, dict):
        owner[attribute] = value
    else:
        setattr(owner, attribute, value)
