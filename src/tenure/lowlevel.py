"""The low level the recipes stand on: what a recipe of your own needs of a session.

Every recipe of the library (the mutex, the semaphore, the election, the counter, the
group...) is a short class over a :class:`tenure.Session` and this module, and a
recipe of your own can be written the same way, outside the package
(docs/recipes.md, "Writing your own recipe"; ``examples/own_recipe.py``):

* :func:`acquire`: a new hold of a semaphore, the primitive every lease is made with
  (:meth:`tenure.Session.acquire` checks its arguments first, then calls it);
* :func:`lock_reentrant`: a reentrant acquisition of a mutex (its holder nests it);
* :func:`start_release`: a lease's release, started without waiting for the answer;
* :func:`backend_session`: the backend's session under a session, to read, write and
  watch semaphores (its core, :class:`tenure.backends.CoreSession`:
  ``describe_semaphore``, ``write_semaphore`` with a ``SwapWrite``,
  ``watch_semaphore``...); what it can do beyond the core are its abilities
  (:func:`tenure.backends.abilities_of`, each tied to a :class:`~tenure.Capability`);
* :func:`caller`: who asks, as a session tells its callers apart (the asyncio task,
  or, in the sync face, the thread).

The session's own error rules hold at this level too: a session that has ended
raises its loss error (SessionClosedError once closed) from each of these.

:func:`acquire` and :func:`lock_reentrant` are the session's own methods taken from
its class: a recipe calls them with the session first, and the mutex's block makes
no call more than it would calling the session's method (its hot path has a budget
of calls, ``tests/bench/test_call_budget.py``).

Layer (CONTRIBUTING.md): this module may import tenure.backends.__init__,
tenure.backends._base, tenure.client._caller, tenure.client._lease,
tenure.client._recipe_session, tenure.client._session_holds and tenure.errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar, cast

from tenure.backends._base import CoreSession
from tenure.client._caller import Caller, current_caller
from tenure.client._lease import Lease, Lock, start_release
from tenure.client._recipe_session import RecipeSession
from tenure.client._session_holds import SessionHolds

__all__ = ["Caller", "acquire", "backend_session", "caller", "lock_reentrant", "start_release"]

L = TypeVar("L", bound=Lease)


class _Acquire(Protocol):
    """:func:`acquire`'s type: the session's method, the session passed first."""

    def __call__(
        self,
        session: RecipeSession,
        kind: type[L],
        name: str,
        count: int,
        data: bytes,
        timeout: float | None,
        ephemeral: bool,
        max_hold: float | None = None,
        /,
    ) -> Coroutine[Any, Any, L]: ...


class _LockReentrant(Protocol):
    """:func:`lock_reentrant`'s type: the session's method, the session passed first."""

    def __call__(
        self,
        session: RecipeSession,
        name: str,
        data: bytes,
        timeout: float | None,
        max_depth: int,
        max_hold: float | None = None,
        /,
    ) -> Coroutine[Any, Any, Lock]: ...


#: ``await acquire(session, kind, name, count, data, timeout, ephemeral[, max_hold])``:
#: a new lease of ``kind`` holding ``count`` tokens of semaphore ``name`` in
#: ``session``, ending ``max_hold`` seconds after its grant if given (its docstring
#: says the rest: help(tenure.lowlevel.acquire)).
acquire: _Acquire = cast(_Acquire, SessionHolds._acquire)

#: ``await lock_reentrant(session, name, data, timeout, max_depth[, max_hold])``: a reentrant
#: acquisition of the mutex ``name`` (a :class:`tenure.Lock`), at once if the caller
#: holds it reentrantly already (help(tenure.lowlevel.lock_reentrant)).
lock_reentrant: _LockReentrant = cast(_LockReentrant, SessionHolds._lock_reentrant)


def backend_session(session: RecipeSession) -> CoreSession:
    """The backend's session under ``session`` (a :class:`tenure.Session`): what a recipe
    reads, writes and watches semaphores through (its core,
    :class:`tenure.backends.CoreSession`; its abilities by :func:`tenure.backends.abilities_of`).

    Take it anew for each operation rather than keeping it: it checks the session.

    Raises:
        LostError: the session has ended (its loss error; SessionClosedError once
            closed; ForkedClientError in a child made by fork since it opened).
    """
    return session._backend_session()


def caller() -> Caller:
    """Who asks now, as a session tells its callers apart: the current asyncio task, or,
    for the sync face's calls, the thread that made the call (a
    :class:`~tenure.client._caller.ThreadCaller`).

    A session refuses a caller that asks again for a semaphore it holds (it would wait
    behind itself), and a reentrant mutex lets its holder nest: both by this. A recipe
    whose acquire must not count as its caller's (a group member's hold, never its
    task's wait) runs it in a task of its own.
    """
    return current_caller(asyncio.current_task())
