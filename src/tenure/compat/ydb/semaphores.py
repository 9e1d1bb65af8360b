"""The semaphore requests of a YDB session stream, and the engine effects that answer them.

Each request is one engine command on the stream's session, answered as YDB's
coordination service answers it (the rules, with their sources, are in
docs/ydb.md). YDB's checks that tenure's engine makes differently come first:

* an acquire asks for more tokens than the session holds or waits for:
  BAD_REQUEST ("Increasing count is not allowed"), where tenure would queue an
  upgrade; more than the limit: BAD_REQUEST;
* an acquire's ``ephemeral`` differs from the semaphore's: PRECONDITION_FAILED;
* an acquire sent again for a waiting request (a client that reconnected sends its
  unanswered requests again, or one that asks for fewer tokens or new data)
  restates it in place (the engine's ``keep_place``): it keeps its place in the
  queue, takes the new count, data and timeout, and the earlier request is
  answered ABORTED, as YDB's does;
* creating a semaphore over an ephemeral one, or deleting an ephemeral one:
  PRECONDITION_FAILED;
* a create, update or delete sent again on a new stream of its session (a client
  that reconnected sends its unanswered requests again) is answered as it was the
  first time, not applied again (:mod:`tenure.compat.ydb.resent`).

A queued acquire is answered ``AcquireSemaphorePending`` at once and
``AcquireSemaphoreResult`` when it ends: acquired, or not (its timeout passed:
SUCCESS and ``acquired`` false; superseded, released, or its semaphore deleted:
ABORTED). A watch is answered ``DescribeSemaphoreChanged`` once, saying whether the
data and the owners changed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, Final

from tenure._core import (
    Acquire,
    AcquireFailed,
    AcquireStatus,
    CancelWatch,
    Command,
    CreateSemaphore,
    DeleteSemaphore,
    DescribeSemaphore,
    Granted,
    Release,
    SemaphoreDescription,
    UpdateSemaphore,
    WatchFired,
)
from tenure._core.holders import Waiter, holder_key
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.resent import Resent
from tenure.compat.ydb.steps import admit_request
from tenure.compat.ydb.stream import ArmedWatch, QueuedAcquire, SessionStream
from tenure.errors import ErrorCode, TenureError, code_of
from tenure.server.plug import HostCalls

#: An acquire's ``timeout_millis`` that waits forever (YDB's ``Max<ui64>``).
FOREVER: Final = 2**64 - 1
#: The longest finite acquire timeout YDB takes: one day, in milliseconds.
MAX_ACQUIRE_TIMEOUT_MS: Final = 86_400_000

#: YDB's words for a queued acquire that ends ABORTED, by the engine's reason: asked
#: again or released while waiting (CANCELLED), its semaphore deleted (NOT_FOUND).
_SUPERSEDED: Final = "Operation superseded by another request"
_ABORTED_WHY: Final = {ErrorCode.CANCELLED: _SUPERSEDED, ErrorCode.NOT_FOUND: "Semaphore destroyed"}

_SUCCESS: Final = pb.Status.SUCCESS
_Response = pb.coordination.SessionResponse


class SemaphoreRequests:
    """Answers the semaphore requests of started streams (see the module docstring).

    ``execute(stream, command)`` applies a command for the stream (authorized as its
    token may); ``send(stream, response)`` queues a ``SessionResponse`` for it.
    """

    def __init__(
        self,
        host: HostCalls,
        execute: Callable[[SessionStream, Command[Any]], Any],
        send: Callable[[SessionStream, Any], None],
        refused: Callable[[SessionStream, BaseException, str], None],
    ) -> None:
        """``refused``: told of each request refused, to audit a quota's refusal."""
        self.host = host
        self._refused = refused
        self._execute = execute
        self._send = send
        self._request_ids = itertools.count(1)  # the engine's names of queued acquires
        #: The answers of the sessions' last changes, for a client that sends one again.
        self.resent = Resent()

    def handle(self, stream: SessionStream, kind: str, request: Any) -> None:
        """Answer one semaphore request (``kind``: its field in ``SessionRequest``)."""
        result_kind, answer = _HANDLERS[kind]
        try:
            admit_request(self.host, stream.token)  # (its token's rate: one per request)
            again = self.resent.recall(stream, kind, request)
            if again is not None:
                self._send(stream, again)  # answered before, on a stream now gone
                return
            answer(self, stream, request)
        except (TenureError, TimeoutError) as error:
            self._refused(stream, error, kind)
            status = pb.status_of(code_of(error))
            self._result(stream, result_kind, request.req_id, status, str(error), request)
        except pb.StatusError as error:
            self._refused(stream, error, kind)
            self._result(stream, result_kind, request.req_id, error.status, str(error), request)

    # -- the requests --------------------------------------------------------------------

    def acquire(self, stream: SessionStream, request: Any) -> None:
        """``AcquireSemaphore``: granted, queued (Pending, then the result), or not."""
        name, count, req_id = request.name, request.count, request.req_id
        if count == 0:
            raise pb.StatusError(pb.Status.BAD_REQUEST, "Acquire must have count > 0")
        millis = request.timeout_millis
        if millis != FOREVER and millis > MAX_ACQUIRE_TIMEOUT_MS:
            raise pb.StatusError(pb.Status.BAD_REQUEST, "Acquire timeout is out of range")
        timeout = None if millis == FOREVER else millis / 1000
        sem = self._semaphore(stream, name)
        if sem is not None:
            if sem.ephemeral != request.ephemeral:
                raise pb.StatusError(
                    pb.Status.PRECONDITION_FAILED, "Semaphore ephemeral mode mismatch"
                )
            if count > sem.limit:
                why = "Cannot acquire more than allowed by the semaphore"
                raise pb.StatusError(pb.Status.BAD_REQUEST, why)
            key = holder_key(stream.session_id, 0)
            owner, waiter = sem.owner(key), sem.waiter(key)
            if (owner is not None and count > owner.count) or (
                waiter is not None and count > waiter.count
            ):
                raise pb.StatusError(pb.Status.BAD_REQUEST, "Increasing count is not allowed")
        elif not request.ephemeral:
            raise _missing(name)
        request_id = next(self._request_ids)
        command = Acquire(
            stream.session_id,
            name,
            count,
            request_id,
            data=request.data,
            timeout=timeout,
            ephemeral=request.ephemeral,
            keep_place=True,  # asked again while queued: restated in place, as YDB does
        )
        # (A queued acquire of this stream that this one supersedes is answered
        # ABORTED by deliver(), from the engine's AcquireFailed, before this returns.)
        result = self._execute(stream, command)
        if result.status is AcquireStatus.QUEUED:
            stream.acquires[name] = QueuedAcquire(request_id, req_id)
            self._send(stream, _Response(acquire_semaphore_pending={"req_id": req_id}))
        else:
            granted = result.status is AcquireStatus.GRANTED
            self._acquired(stream, req_id, _SUCCESS, granted=granted)

    def release(self, stream: SessionStream, request: Any) -> None:
        """``ReleaseSemaphore``: give back what the session holds, or stop waiting."""
        released = self._execute(stream, Release(stream.session_id, request.name))
        self._send(
            stream,
            _Response(
                release_semaphore_result={
                    "req_id": request.req_id,
                    "status": _SUCCESS,
                    "released": released,
                }
            ),
        )

    def describe(self, stream: SessionStream, request: Any) -> None:
        """``DescribeSemaphore``, arming a watch if asked (replacing this stream's last one)."""
        name = request.name
        watching = request.watch_data or request.watch_owners
        if self._semaphore(stream, name) is None:
            raise pb.StatusError(pb.Status.NOT_FOUND, f"Semaphore not found: {name!r}")
        if watching:
            self._disarm(stream, name)
        command = DescribeSemaphore(
            stream.session_id,
            name,
            owners=request.include_owners or request.watch_owners,
            waiters=request.include_waiters,
            # (YDB fires an owners watch when the data changes too.)
            watch_data=watching,
            watch_owners=request.watch_owners,
        )
        result = self._execute(stream, command)
        description = result.description
        # The engine's waiters as they stand now (the description was made from them,
        # in the same order): their arrival numbers and timeouts.
        sem = self._semaphore(stream, name) if request.include_waiters else None
        queued = () if sem is None else tuple(sem.waiters.values())
        if result.watch_id is not None:
            stream.watches[name] = ArmedWatch(
                result.watch_id, request.req_id, description.data, _owners(description)
            )
        self._send(
            stream,
            _Response(
                describe_semaphore_result={
                    "req_id": request.req_id,
                    "status": _SUCCESS,
                    "semaphore_description": _described(
                        description, request.include_owners, request.include_waiters, queued
                    ),
                    "watch_added": result.watch_id is not None,
                }
            ),
        )

    def _disarm(self, stream: SessionStream, name: str) -> None:
        """A new watch replaces the stream's watch on ``name``: tell the old one nothing changed."""
        old = stream.watches.pop(name, None)
        if old is None:
            return
        self._execute(stream, CancelWatch(stream.session_id, old.watch_id))
        self._changed(stream, old.req_id, data=False, owners=False)

    def create(self, stream: SessionStream, request: Any) -> None:
        """``CreateSemaphore``: a persistent semaphore with a limit and data."""
        if request.limit == 0:
            raise pb.StatusError(pb.Status.BAD_REQUEST, "Semaphores must have limit > 0")
        sem = self._semaphore(stream, request.name)
        if sem is not None and sem.ephemeral:
            why = "Cannot create semaphore due to ephemeral locks"
            raise pb.StatusError(pb.Status.PRECONDITION_FAILED, why)
        command = CreateSemaphore(stream.session_id, request.name, request.limit, request.data)
        self._execute(stream, command)
        self._result(stream, "create_semaphore_result", request.req_id, _SUCCESS, "", request)

    def update(self, stream: SessionStream, request: Any) -> None:
        """``UpdateSemaphore``: replace the semaphore's data."""
        if self._semaphore(stream, request.name) is None:
            raise _missing(request.name)
        command = UpdateSemaphore(stream.session_id, request.name, request.data)
        self._execute(stream, command)
        self._result(stream, "update_semaphore_result", request.req_id, _SUCCESS, "", request)

    def delete(self, stream: SessionStream, request: Any) -> None:
        """``DeleteSemaphore``: only an idle one unless ``force`` (its waiters: ABORTED)."""
        sem = self._semaphore(stream, request.name)
        if sem is None:
            raise _missing(request.name)
        if sem.ephemeral:
            raise pb.StatusError(
                pb.Status.PRECONDITION_FAILED, "Cannot delete ephemeral semaphores"
            )
        command = DeleteSemaphore(stream.session_id, request.name, force=request.force)
        self._execute(stream, command)
        self._result(stream, "delete_semaphore_result", request.req_id, _SUCCESS, "", request)

    # -- effects -------------------------------------------------------------------------

    def deliver(self, stream: SessionStream, effect: Granted | AcquireFailed | WatchFired) -> None:
        """Answer the request of ``stream`` that an engine effect ends, if it is its own."""
        if isinstance(effect, WatchFired):
            armed = stream.watches.get(effect.name)
            if armed is None or armed.watch_id != effect.watch_id:
                return  # a watch of an earlier stream of the session: YDB drops those
            del stream.watches[effect.name]
            now = effect.description
            if now is None or not now.exists:  # deleted: everything changed
                self._changed(stream, armed.req_id, data=True, owners=True)
            else:
                data, owners = now.data != armed.data, _owners(now) != armed.owners
                self._changed(stream, armed.req_id, data=data, owners=owners)
            return
        queued = stream.acquires.get(effect.name)
        if queued is None or queued.request_id != effect.request_id:
            return  # an acquire of an earlier stream: it sends the request again
        del stream.acquires[effect.name]
        if isinstance(effect, Granted):
            self._acquired(stream, queued.req_id, _SUCCESS, granted=True)
        elif effect.code is ErrorCode.TIMEOUT:
            self._acquired(stream, queued.req_id, _SUCCESS, granted=False)
        else:  # superseded, released while waiting, deleted
            why = _ABORTED_WHY.get(effect.code, effect.message)
            self._acquired(stream, queued.req_id, pb.Status.ABORTED, why)

    # -- answers -------------------------------------------------------------------------

    def _acquired(
        self, stream: SessionStream, req_id: int, status: int, why: str = "", granted: bool = False
    ) -> None:
        result = {"req_id": req_id, "status": status, "issues": pb.issues(why), "acquired": granted}
        self._send(stream, _Response(acquire_semaphore_result=result))

    def _changed(self, stream: SessionStream, req_id: int, *, data: bool, owners: bool) -> None:
        changed = {"req_id": req_id, "data_changed": data, "owners_changed": owners}
        self._send(stream, _Response(describe_semaphore_changed=changed))

    def _result(
        self,
        stream: SessionStream,
        kind: str,
        req_id: int,
        status: int,
        why: str = "",
        request: Any = None,
    ) -> None:
        """Send a result (``kind``'s); that of a change (``request``) is kept too."""
        if kind == "acquire_semaphore_result":
            self._acquired(stream, req_id, status, why)
            return
        result = {"req_id": req_id, "status": status, "issues": pb.issues(why)}
        response = _Response(**{kind: result})
        if request is not None:
            self.resent.keep(stream, kind.removesuffix("_result"), request, response)
        self._send(stream, response)

    def _semaphore(self, stream: SessionStream, name: str) -> Any:
        """The engine's semaphore ``name`` in the stream's node (None: there is none).

        Read, not changed: YDB's checks that the engine does not make need its state.
        """
        node = self.host.engine.nodes.get(stream.node)
        return None if node is None else node.semaphores.get(name)


def _missing(name: str) -> pb.StatusError:
    """NOT_FOUND in YDB's words for an acquire, update or delete
    (``tx_semaphore_acquire.cpp``, ``tx_semaphore_update.cpp``,
    ``tx_semaphore_delete.cpp``; a describe says "Semaphore not found"), naming the
    semaphore."""
    return pb.StatusError(pb.Status.NOT_FOUND, f"Semaphore does not exist: {name!r}")


def _owners(description: SemaphoreDescription) -> tuple[tuple[int, int, bytes], ...]:
    return tuple((o.session_id, o.count, o.data) for o in description.owners)


def _described(
    description: SemaphoreDescription, owners: bool, waiters: bool, queued: tuple[Waiter, ...]
) -> dict[str, Any]:
    """A ``SemaphoreDescription`` message's fields.

    An owner's ``order_id`` is its fencing token (both grow with every grant), and
    its ``timeout_millis`` 0 (YDB never sets an owner's). A waiter's ``order_id`` is
    its arrival number in the engine (ascending along the queue, as YDB's), and its
    ``timeout_millis`` the timeout it asked for (``FOREVER``: none), as YDB's
    ``tx_semaphore_describe.cpp`` describes them; ``queued`` are the engine's waiters
    the description's were made from, in the same order.
    """
    waiter_infos = description.waiters if waiters else ()
    assert len(queued) == len(waiter_infos), "the waiters described are the engine's"
    return {
        "name": description.name,
        "data": description.data,
        "count": description.count,
        "limit": description.limit,
        "ephemeral": description.ephemeral,
        "owners": [
            {"order_id": o.token, "session_id": o.session_id, "count": o.count, "data": o.data}
            for o in (description.owners if owners else ())
        ],
        "waiters": [
            {
                "order_id": engine.order,
                "session_id": w.session_id,
                "timeout_millis": FOREVER
                if engine.timeout is None
                else round(engine.timeout * 1000),
                "count": w.count,
                "data": w.data,
            }
            for w, engine in zip(waiter_infos, queued, strict=True)
        ],
    }


#: Each request kind: the result it is answered with, and its handler.
_HANDLERS: Final[dict[str, tuple[str, Callable[[SemaphoreRequests, SessionStream, Any], None]]]] = {
    "acquire_semaphore": ("acquire_semaphore_result", SemaphoreRequests.acquire),
    "release_semaphore": ("release_semaphore_result", SemaphoreRequests.release),
    "describe_semaphore": ("describe_semaphore_result", SemaphoreRequests.describe),
    "create_semaphore": ("create_semaphore_result", SemaphoreRequests.create),
    "update_semaphore": ("update_semaphore_result", SemaphoreRequests.update),
    "delete_semaphore": ("delete_semaphore_result", SemaphoreRequests.delete),
}

#: The request kinds :meth:`SemaphoreRequests.handle` answers.
SEMAPHORE_REQUESTS: Final = frozenset(_HANDLERS)
