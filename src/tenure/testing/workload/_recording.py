"""How a client of the linearizable workload records its operations (:class:`LinRecorder`).

The rules (:mod:`tenure.testing.workload._client` says what each step records): a
request whose answer was lost (no answer within
:attr:`~tenure.testing.workload.LinConfig.op_timeout`, or ``UnavailableError`` and
other connection errors) is recorded ``info`` and sent again, the same request, as a
new operation of a new process (:class:`~tenure.testing.workload._books.ProcessIds`),
:data:`RETRIES` times at most. A lost session (``LostError``) ends the step ``info``
and the client opens a new session.

A hold (a lock, a semaphore's tokens, an election's leadership: :meth:`LinRecorder._hold`)
is an ``acquire`` of its model, a while held, then a ``release``. A ``release()`` or
``leave()`` returns once the service applied it, or once the session ended (given up
on the client's clock): the latter is recorded ``info``, as a loss the client declared
itself, not ``ok`` when the call returned. A loss is recorded by :meth:`LinRecorder._on_loss`
(:mod:`tenure.testing.workload._client`'s docstring says how).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol, TypeVar

import tenure
from tenure.errors import LeaseLostError, LostError, UnavailableError
from tenure.testing.lincheck import HistoryWriter
from tenure.testing.workload._books import Books, ProcessIds
from tenure.testing.workload._config import LinConfig

__all__ = ["ANSWER_LOST", "RETRIES", "LinRecorder", "Notes", "Pauses", "SessionGoneError"]

T = TypeVar("T")

#: How many times a request whose answer was lost is sent again.
RETRIES: Final = 2
#: The errors of a request whose answer was lost (its outcome unknown).
ANSWER_LOST: Final = (UnavailableError, TimeoutError, OSError)


class SessionGoneError(Exception):
    """The client's session ended: open a new one."""


class Notes(Protocol):
    """Where a client writes what is not an operation (a client error, a lost session)."""

    def note(self, process: str, kind: str, **fields: Any) -> None:
        """Record a note of ``kind`` by ``process``."""


class Pauses(Protocol):
    """A worker's pauses: its whole process standing still past the window while one
    of its clients holds (the fault suite blocks the worker's loop; the simulation
    pauses the simulated process)."""

    async def maybe(self, rng: random.Random, holder: str) -> None:
        """Stand still now if a pause is due (``holder``: the client that holds): the
        client goes on after the pause, whatever else ran meanwhile."""


class LinRecorder:
    """What a client of the workload records its operations with (the module
    docstring's rules): :class:`~tenure.testing.workload.LinClient` is one."""

    def __init__(
        self,
        config: LinConfig,
        number: int,
        books: Books,
        pauses: Pauses,
        recorder: Notes,
    ) -> None:
        self.config = config
        self.number = number
        self.label = f"w{config.index}c{number}"
        self.url = config.door_of(number)
        self.books = books
        self.pauses = pauses
        self.rec = recorder
        self.rng = random.Random(f"{config.seed}-{self.label}")
        self.procs = ProcessIds(self.label)
        self.ops = 0
        self._values = 0
        self.last_read: dict[str, int] = {}
        #: Whether it reads the registers stale (:meth:`LinConfig.reads_standbys`); if
        #: so its register operations name its session (the client), whose order a
        #: stale read keeps across its process ids (lincheck's ``session``).
        self.reads_stale = config.reads_standbys(number)
        self.register_fields = {"session": self.label} if self.reads_stale else None
        self.members: dict[str, tenure.GroupMember] = {}
        #: The grants recorded ``ok``, as (name, token): a session taken back holds
        #: these, or others its client never heard of.
        self.granted: set[tuple[str, int]] = set()

    # -- recording ------------------------------------------------------------------------

    async def _call(
        self,
        model: str,
        f: str,
        key: str,
        value: Any,
        action: Callable[[], Awaitable[T]],
        judge: Callable[[T], tuple[bool, Any]],
        *,
        fields: Mapping[str, Any] | None = None,
        answered: Callable[[], Mapping[str, Any]] | None = None,
    ) -> T | None:
        """Invoke ``f``, run ``action`` (bounded), record its ``ok``/``fail`` by ``judge``
        (whether it succeeded, the value to record); a lost answer is ``info`` and the
        same request again as a new process (module docstring); None if none answered.
        ``fields``: more fields of each invoke (a stale read's staleness, the client's
        session); ``answered``: more of an answer's, asked once it came (who answered)."""
        writer = self.books.writer(model)
        for _ in range(RETRIES + 1):
            process = self.procs.current
            writer.invoke(process, f, value, key, fields=fields)
            try:
                async with asyncio.timeout(self.config.op_timeout):
                    result = await action()
            except asyncio.CancelledError:
                writer.info(process, f, value, key)
                self.procs.unknown()
                raise
            except LostError as error:
                writer.info(process, f, value, key)
                self.procs.unknown()
                raise SessionGoneError from error
            except ANSWER_LOST:
                writer.info(process, f, value, key)
                self.procs.unknown()
                continue
            succeeded, recorded = judge(result)
            told = None if answered is None else answered()
            (writer.ok if succeeded else writer.fail)(process, f, recorded, key, fields=told)
            return result
        return None

    def _value(self) -> int:
        """A value no other write of the run carries."""
        self._values += 1
        return (self.config.index * 1000 + self.number) * 1_000_000 + self._values

    # -- holds ----------------------------------------------------------------------------

    async def _hold(
        self,
        session: tenure.Session,
        model: str,
        key: str,
        value: Any,
        take: Callable[[], Awaitable[tenure.Lease]],
        *,
        refused: tuple[type[Exception], ...] = (),
        before_release: Callable[[tenure.Lease], Awaitable[bool]] | None = None,
        ends_unseen: bool = False,
    ) -> None:
        """``take()`` (an ``acquire`` of ``value``: ``ok`` with the token; ``fail`` when not
        granted within the wait, or refused with one of ``refused``), a hold (perhaps a
        pause of the whole worker), ``before_release(lease)`` if given (true if the hold
        may have ended another way since, untold: it recorded so, :meth:`_untold`), then
        ``release()``; a loss meanwhile is a ``lost`` (:meth:`_on_loss`), invoked at the
        grant seen, or at the acquire's call if the hold ``ends_unseen`` (it may end by
        itself before its grant reaches the client: a ``max_hold``; untold too, so
        :meth:`_untold` from the acquire's call)."""
        writer = self.books.writer(model)
        process = self.procs.current
        called = self.books.now_ns()
        writer.invoke(process, "acquire", value, key)
        try:
            async with asyncio.timeout(self.config.op_timeout + self.config.acquire_wait) as bound:
                lease = await take()
        except asyncio.CancelledError:
            writer.info(process, "acquire", value, key)
            self.procs.unknown()
            raise
        except refused:
            writer.fail(process, "acquire", value, key)
            return
        except LostError as error:
            writer.info(process, "acquire", value, key)
            self.procs.unknown()
            raise SessionGoneError from error
        except ANSWER_LOST:
            if isinstance(bound, asyncio.Timeout) and not bound.expired():
                writer.fail(process, "acquire", value, key)  # the wait ran out: not granted
                return
            writer.info(process, "acquire", value, key)
            self.procs.unknown()
            return
        seen = self.books.now_ns()
        self.books.record_at(seen, model, "ok", process, "acquire", lease.token, key)
        self.granted.add((key, lease.token))
        since = called if ends_unseen else seen
        told = self._on_loss(lease, model, "lost", key, lease.token, lease.token, since)
        if ends_unseen:  # (its max_hold may end it, untold)
            self._untold(model, key, lease.token, called)
        await asyncio.sleep(self.rng.uniform(*self.config.hold))
        await self.pauses.maybe(self.rng, self.label)
        offered = before_release is not None and await before_release(lease)
        elsewhere = ends_unseen or offered
        await self._end(
            session, lease, writer, self.procs.current, "release", lease.token, key, elsewhere, told
        )

    async def _end(
        self,
        session: tenure.Session,
        held: tenure.Lease | tenure.GroupMember,
        writer: HistoryWriter,
        process: str,
        f: str,
        value: Any,
        key: str,
        elsewhere: bool = False,
        told: Callable[[LostError | None], None] | None = None,
    ) -> None:
        """``release()`` or ``leave()`` (``f``) of ``held``, recorded: ``info`` if its
        answer was lost; once it returned, ``fail`` if the service said the hold was lost
        first (it held nothing by then); ``info`` if the session ended meanwhile, or the
        client gave the hold up itself (the call returns then too, but the service may
        keep the hold until it expires the session, later: module docstring; a read of
        the holders may still show it); ``ok`` if the service applied it. The release
        of a hold that may have ended ``elsewhere`` (offered to another session, which
        may adopt it; its ``max_hold``), untold (:meth:`_untold` recorded so), is
        ``info`` even when it returned, unless the target tells an end its release
        crossed (:attr:`LinConfig.told_when_crossed`). A loss the service told only as
        the release returned (it had ended the hold before the release reached it:
        ``lost_reason`` set, the lease's callbacks told of the release) is recorded by ``told``, the
        hold's :meth:`_on_loss` recorder, now."""
        writer.invoke(process, f, value, key)
        try:
            async with asyncio.timeout(self.config.op_timeout):
                await (held.leave() if isinstance(held, tenure.GroupMember) else held.release())
        except ANSWER_LOST:
            writer.info(process, f, value, key)
            self.procs.unknown()
            return
        if isinstance(held.lost_reason, LeaseLostError):
            writer.fail(process, f, value, key)
            if told is not None:
                told(held.lost_reason)
        elif (
            held.lost_reason is not None
            or session.lost_reason is not None
            or (elsewhere and not self.config.told_when_crossed)
        ):
            writer.info(process, f, value, key)
            self.procs.unknown()
        else:
            writer.ok(process, f, value, key)

    def _untold(self, model: str, key: str, token: int, since: int) -> None:
        """Record that the hold of ``token`` may have ended by itself any time from
        ``since`` on, untold: a ``lost`` invoked then, never completed. Recorded at
        once, whatever follows (a client killed with its release unanswered may have
        lost it so): :func:`~tenure.testing.workload.close_holds` drops it if the
        hold's release is answered ``ok`` or ``fail``, which tells how it ended."""
        process = self.procs.untold(key, token)
        self.books.record_at(since, model, "invoke", process, "lost", token, key)

    def _on_loss(
        self,
        held: tenure.Lease | tenure.GroupMember,
        model: str,
        f: str,
        key: str,
        value: Any,
        token: int,
        seen: int,
    ) -> Callable[[LostError | None], None]:
        """Record ``held``'s loss when the client is told of it: ``f`` invoked at ``seen``
        (the grant seen), on a process of its own, ``ok`` then if the service said the
        hold ended, never completed if the client gave it up itself (module docstring).
        Returns the recorder (called again with the loss, it records it once)."""
        process = self.procs.loss(key, token)
        recorded = False

        def told(reason: LostError | None) -> None:
            nonlocal recorded
            if reason is None or recorded:
                return  # released or left by the client: recorded as such
            recorded = True
            self.books.record_at(seen, model, "invoke", process, f, value, key)
            if isinstance(reason, LeaseLostError):
                told_at = max(self.books.now_ns(), seen)
                self.books.record_at(told_at, model, "ok", process, f, value, key)

        held.lost.add_callback(told)
        return told
