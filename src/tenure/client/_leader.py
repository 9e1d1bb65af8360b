"""A leader that keeps running: ``await client.lead(node, name, work)``.

Curator's LeaderSelector with auto-requeue, written over the public primitives: a
session of the client (a new one after each loss), the election ``name`` in it,
``campaign(data)``, and ``async with leadership:``, which cancels its body at once
when leadership is lost. One *term* is one leadership: ``work(leadership)`` runs
while it lasts, and ``leadership.token`` fences what it does.

What each end of a term does:

* ``work`` **returns**: it resigns (the block's end). With ``requeue`` it campaigns
  again in the same session, behind the candidates already waiting (FIFO: each of
  them leads before this one again); without, :func:`lead` returns.
* **Leadership is lost** (an operator deleted the election by force; LeaderChanged)
  or **the session is** (it expired, was killed, its node's window passed): ``work``
  is cancelled at once, and once it has ended the runner campaigns again, in the same
  session if it lives, else in a new one. A loss never ends the runner, with or
  without ``requeue``: ``work`` did not finish, so it is run again in a new term.
* ``work`` **raises** anything but that loss: the block's end resigns, the session is
  closed, and the error propagates out of :func:`lead` (a bug in ``work`` must not
  loop silently; wrap ``work`` to retry if you want that).
* :func:`lead` **is cancelled**: ``work`` is cancelled, leadership resigned, the
  session closed (shielded: a second cancellation does not cut them short), and the
  CancelledError propagates.

Opening a session and campaigning are retried after a transient failure
(:class:`~tenure.errors.UnavailableError`, which NotLeaderError is: a cluster
between leaders) with a capped exponential backoff with jitter (:class:`Backoff`),
forever: a runner's purpose is to outlive outages. A campaign that ends with
NotFoundError (the election deleted by force while it waited) is retried the same
way; if the node itself is gone, the next session cannot open and its NotFoundError
propagates. Other errors (a missing node, a refused permission, a limit) propagate.
A closed client ends the runner with ClientClosedError.

Terms never overlap in one runner: the next campaign starts only once ``work`` has
ended (however it ends). Across processes, each term's token is greater than every
earlier term's (FENCING_TOKENS), and a lost leader's ``work`` is cancelled when the
loss reaches it: on a session's expiry that is at its client's local deadline, no
later than the store's; on a kill or a forced delete, when the store's notice
arrives, which a node's ``lock_delay`` covers. A process paused past that, or a
``work`` that ignores its cancellation, can still act late: fence with the token.
A cluster's failover is not a loss: sessions re-attach to the new leader within
their recovery window, with their leadership and the term's ``work`` going on.

Layer (CONTRIBUTING.md): this module may also import tenure.client._session.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

from tenure.client import _args
from tenure.client._lease import Leadership
from tenure.client._session import Session
from tenure.errors import InvalidArgumentError, LostError, NotFoundError, UnavailableError

log = logging.getLogger("tenure.client")
#: The backoff's own generator: the random module's shared one is the application's.
_JITTER: Final = random.Random()

#: The first pause, in seconds, after a transient failure to open a session or to
#: campaign; each failure in a row doubles it (:data:`RETRY_FACTOR`).
RETRY_FIRST: Final = 0.05
#: The longest pause between two tries, in seconds: a backend that comes back is
#: found within about this long.
RETRY_MAX: Final = 5.0
#: How much each failure in a row lengthens the next pause.
RETRY_FACTOR: Final = 2.0

#: What ``lead`` runs in each term: ``await work(leadership)``.
LeaderWork = Callable[[Leadership], Awaitable[object]]


class SessionOpener(Protocol):
    """What the runner needs of its client (a :class:`~tenure.Client`): sessions.

    A protocol, so that the client's module imports this one and never the other
    way round (``tests/test_import_graph.py``).
    """

    def session(
        self, node: str, *, recovery_window: float | None = None, description: str = ""
    ) -> Awaitable[Session]:
        """Open a session on ``node``."""
        ...


class Backoff:
    """The pauses between tries after transient failures.

    The n-th failure in a row pauses for a time drawn at random in the upper half of
    ``min(most, first * factor**(n-1))`` (jitter, so that runners that failed
    together do not all come back at once); a success starts again from ``first``.
    """

    def __init__(
        self,
        first: float = RETRY_FIRST,
        most: float = RETRY_MAX,
        factor: float = RETRY_FACTOR,
        rng: Callable[[], float] = _JITTER.random,
    ) -> None:
        if not 0 < first <= most or factor < 1:
            raise InvalidArgumentError(
                f"a backoff needs 0 < first <= most and factor >= 1, got {first}, {most}, {factor}"
            )
        self.first, self.most, self.factor = first, most, factor
        self._rng = rng
        self._ceiling = first

    def next_pause(self) -> float:
        """The pause before the next try (and the ceiling of the one after grows)."""
        pause = self._ceiling * (0.5 + self._rng() / 2)
        self._ceiling = min(self.most, self._ceiling * self.factor)
        return pause

    def reset(self) -> None:
        """A try succeeded: the next failure pauses from ``first`` again."""
        self._ceiling = self.first


class Terms:
    """The campaigns of one runner: its session, kept open (a new one after a loss),
    and the election it campaigns in, retried over transient failures.

    Its policy is the runner's, whichever face runs ``work``: :func:`lead` runs it in
    the runner's own task, the sync face (``tenure.sync.Client.lead``) in the
    calling thread, between two calls of :meth:`next`.
    """

    def __init__(
        self,
        client: SessionOpener,
        node: str,
        name: str,
        data: bytes,
        recovery_window: float | None,
        description: str,
    ) -> None:
        self.node, self.name, self.data = node, name, data
        self._client = client
        self._open_args = (recovery_window, description)
        self._backoff = Backoff()
        #: The session of the current (or last) campaign; None before the first.
        self.session: Session | None = None

    def __repr__(self) -> str:
        return f"<Terms of election {self.name!r} in node {self.node!r}>"

    async def next(self) -> Leadership:
        """Campaign until leader: the leadership of the next term."""
        while True:
            try:
                session = await self._current_session()
            except UnavailableError as error:
                await self._pause("open a session", error)
                continue
            try:
                leadership = await session.election(self.name).campaign(self.data)
            except (UnavailableError, NotFoundError) as error:
                await self._pause("campaign", error)
                continue
            except LostError as error:
                # The session ended while it waited: the next turn opens another.
                log.info("election %r: the campaign's session ended: %s", self.name, error)
                continue
            self._backoff.reset()
            return leadership

    async def aclose(self) -> None:
        """Close the session (resigning whatever it holds). Idempotent.

        A store out of reach cannot mask what ended the runner (``work``'s error,
        a cancellation): the session has ended here, and ends in the store once its
        recovery window has passed.
        """
        if self.session is not None:
            try:
                await self.session.close()
            except UnavailableError as error:
                log.info("election %r: could not close its session: %s", self.name, error)

    async def _current_session(self) -> Session:
        if self.session is None or self.session.closed:
            recovery_window, description = self._open_args
            self.session = await self._client.session(
                self.node, recovery_window=recovery_window, description=description
            )
        return self.session

    async def _pause(self, what: str, error: Exception) -> None:
        pause = self._backoff.next_pause()
        log.info("election %r: could not %s (%s); again in %.2fs", self.name, what, error, pause)
        await asyncio.sleep(pause)


def is_loss_of(reason: LostError | None, error: BaseException) -> bool:
    """Whether ``error``, out of a term's block, is the loss of its leadership (then
    the runner campaigns again) rather than ``work``'s own failure (then it propagates).

    ``reason`` is the leadership's ``lost_reason``. A LostError while the leadership
    lives is ``work``'s (something else it held was lost), not the term's end.
    """
    return reason is not None and isinstance(error, LostError)


def checked(
    client: SessionOpener,
    node: object,
    name: object,
    work: object,
    data: object,
    requeue: object,
    recovery_window: object,
    description: object,
) -> tuple[Terms, Callable[[Any], object], bool]:
    """The arguments of ``lead`` (either face's) checked: the terms, ``work``, ``requeue``."""
    terms = Terms(
        client,
        _args.node_name(node),
        _args.semaphore_name(name),
        _args.as_data(data),
        _args.recovery_window(recovery_window),
        _args.description(description),
    )
    if not callable(work):
        raise InvalidArgumentError(f"work must be a function of the leadership, got {work!r:.80}")
    return terms, work, _args.flag("requeue", requeue)


async def run(terms: Terms, work: Callable[[Leadership], object], requeue: bool) -> None:
    """Lead term after term (see the module docstring) until ``work`` returns and
    ``requeue`` is false, ``work`` raises, or this is cancelled."""
    try:
        while True:
            leadership = await terms.next()
            try:
                async with leadership:
                    running = work(leadership)
                    if not inspect.isawaitable(running):
                        raise InvalidArgumentError(
                            f"work must be an async function (it returned {running!r:.80})"
                        )
                    await running
            except LostError as error:
                if not is_loss_of(leadership.lost_reason, error):
                    raise
                log.info("election %r: term %d ended: %s", terms.name, leadership.token, error)
                continue
            if not requeue:
                return
            # One turn of the loop between terms: a ``work`` that returns at once must
            # not hold the loop (on memory:// a whole term can pass without a pause).
            await asyncio.sleep(0)
    finally:
        await asyncio.shield(terms.aclose())
