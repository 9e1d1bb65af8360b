"""A big fan-out's pushes encoded over several turns of the loop, each connection's in order.

One change of a semaphore that a fleet watches fires one watch per watcher: 100,000
pushes to encode and write. Encoded all in the step that made the change, they kept
the loop for the whole fan-out, and the change's own answer, and every other
client's, waited behind them. :class:`LaterPushes` takes what a step routes past
its room (:meth:`room`: ``--step-budget`` times :data:`PUSHES_PER_BUDGET_ITEM`) and
encodes it a slice per turn of the loop (:meth:`drain`, scheduled with
``call_soon``: the loop polls its sockets between slices, so other requests are
answered meanwhile).

What it keeps, docs/protocol.md section 5 asks: everything the engine did is
written to a connection in the order the engine did it, and a command's pushes to
its own connection come before its answer. So once a connection has pushes waiting
here, every later push to it waits behind them (:attr:`waiting`), and anything else
queued for it (an answer, a Pong) first has them encoded ahead of it
(:meth:`catch_up`, called by the outboxes before they queue a message). Connections
are independent streams: one's pushes may leave before or after another's. Every
push is encoded exactly once, as it would have been in the step; a connection that
closed meanwhile takes none (as :meth:`Outboxes.push` skips them).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Final

from tenure._core import Effect
from tenure._protocol.fanout import FiredPushes
from tenure.server._net.gate import Conn

#: Pushes one turn encodes per item of ``--step-budget`` (an item of deadline work,
#: an expiry's, costs about ten pushes' encoding): at the default budget of 1,000,
#: 10,000 pushes a turn, about 10 ms of the compiled build's CPU on this machine.
PUSHES_PER_BUDGET_ITEM: Final = 10

#: How many turns' room may wait at once: past it, what waits is encoded in the step
#: of the change that would add to it (:meth:`LaterPushes.bound`), so a writer that
#: changes a watched semaphore faster than its fan-outs drain pays for them in its
#: own steps, as before issue 51, and what waits stays one fan-out and this many.
MOST_TURNS: Final = 10
#: Seconds the cyclic collector waits for a fan-out's pushes at the most: a stream
#: of changes that never lets them all drain must not keep it from running.
MAX_PAUSE: Final = 1.0

#: What encodes one push (:meth:`tenure.server._net.outbox.Outboxes.push`).
Push = Callable[[Conn, Effect, FiredPushes | None], None]


class LaterPushes:
    """The pushes waiting for a later turn, per connection (see the module docstring)."""

    __slots__ = (
        "_count",
        "_fired",
        "_paused_at",
        "_push",
        "_scheduled",
        "busy",
        "idle",
        "max_pause",
        "most",
        "room_per_turn",
        "waiting",
    )

    def __init__(self, push: Push, step_budget: int) -> None:
        """``push`` encodes one push (and queues it, which asks for the turn's end);
        ``step_budget``: the server's ``--step-budget``."""
        self._push = push
        #: Called when the first push comes to wait, and ``idle`` when none is left
        #: or ``max_pause`` seconds later, whichever comes first (the routing pauses
        #: the cyclic collector meanwhile: the pushes' effects are short-lived,
        #: tenure._runtime.collector).
        self.busy: Callable[[], None] = _nothing
        self.idle: Callable[[], None] = _nothing
        #: Pushes one turn encodes, and the most that wait before a change's step
        #: encodes them (:data:`MOST_TURNS`).
        self.room_per_turn = max(1, step_budget) * PUSHES_PER_BUDGET_ITEM
        self.most = self.room_per_turn * MOST_TURNS
        #: How long ``busy`` may last before ``idle`` is called anyway (:data:`MAX_PAUSE`).
        self.max_pause = MAX_PAUSE
        self._count = 0
        self._paused_at: float | None = None  # (when ``busy`` was called; None: idle)
        #: Connection -> its waiting pushes, in the order routed; connections in the
        #: order they began waiting. Read, not changed, by the outboxes: ``conn in
        #: waiting`` says a message for ``conn`` must wait behind them. (Effects
        #: alone, no object per push: a fan-out's 100,000 would each be one more for
        #: the cyclic collector to walk while they wait.)
        self.waiting: OrderedDict[Conn, deque[Effect]] = OrderedDict()
        #: The shared encodings of what waits (one for all the deliveries it holds,
        #: from its first to its being empty: it compares descriptions by identity
        #: and keeps them alive, so sharing it across deliveries stays exact).
        self._fired = FiredPushes()
        self._scheduled = False

    def __len__(self) -> int:
        """How many pushes wait."""
        return self._count

    def defer(self, conn: Conn, effect: Effect) -> None:
        """Keep a push to ``conn`` for a later turn, behind those kept for it already."""
        waiting = self.waiting.get(conn)
        if waiting is None:
            if not self.waiting:
                self._paused_at = asyncio.get_running_loop().time()
                self.busy()
            waiting = self.waiting[conn] = deque()
        waiting.append(effect)
        self._count += 1
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.drain)

    def catch_up(self, conn: Conn) -> None:
        """Encode now every push waiting for ``conn`` (something else is queued for it
        next, which must come after them)."""
        waiting = self.waiting.pop(conn, None)
        if waiting is not None:
            self._count -= len(waiting)
            push, fired = self._push, self._fired
            for effect in waiting:
                push(conn, effect, fired)
            if not self.waiting:
                self._emptied()

    def bound(self, adding: int) -> None:
        """Before a step routes ``adding`` pushes: if with them more than :attr:`most`
        would wait, encode every waiting push now (each connection's still first)."""
        if self._count + adding > self.most:
            while self.waiting:
                self.catch_up(next(iter(self.waiting)))

    def drain(self) -> None:
        """Encode one turn's room of waiting pushes, oldest connection first; schedule
        the next turn's if any are left."""
        self._scheduled = False
        if not self.waiting:
            return  # (a catch-up took the last: it said so)
        room, push, waiting, fired = self.room_per_turn, self._push, self.waiting, self._fired
        while room > 0 and waiting:
            # Taken out while its pushes are encoded: a push is a message for it, which
            # must not catch up (encode again) what this loop is encoding.
            conn, queue = waiting.popitem(last=False)
            while room > 0 and queue:
                push(conn, queue.popleft(), fired)
                room -= 1
                self._count -= 1
            if queue:  # (the room ran out: it goes on first at the next turn)
                waiting[conn] = queue
                waiting.move_to_end(conn, last=False)
        if waiting:
            loop = asyncio.get_running_loop()
            self._scheduled = True
            loop.call_soon(self.drain)
            paused_at = self._paused_at
            if paused_at is not None and loop.time() - paused_at > self.max_pause:
                self._paused_at = None  # (the collector runs again: MAX_PAUSE)
                self.idle()
        else:
            self._emptied()

    def clear(self) -> None:
        """Forget every waiting push (a cluster leader stepping down: nothing it had
        not made durable may reach anyone)."""
        if self.waiting:
            self.waiting.clear()
            self._count = 0
            self._emptied()

    def _emptied(self) -> None:
        """Nothing waits any more."""
        self._fired = FiredPushes()  # (what it kept alive may go)
        if self._paused_at is not None:  # (else idle was called already: MAX_PAUSE)
            self._paused_at = None
            self.idle()


def _nothing() -> None:
    """What :attr:`LaterPushes.busy` and ``idle`` do unless set: nothing."""
