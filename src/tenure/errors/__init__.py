"""The one exception tree of tenure.

Every error tenure raises on purpose derives from :class:`TenureError`::

    TenureError
     ├── LostError                    something you held has ended without your say-so
     │    ├── SessionClosedError      the session was closed (by you, or with its client)
     │    │    └── ClientClosedError  the client was closed: its sessions went with it
     │    │         └── ForkedClientError  a parent's client, used in a child made by fork
     │    ├── SessionExpiredError     the server expired the session (recovery window passed)
     │    └── LeaseLostError          a lease ended: semaphore deleted, node dropped, lease TTL
     │         └── LeaderChangedError leadership ended or the observed leader changed
     ├── AcquireCancelledError        a queued acquire was withdrawn before it was granted
     ├── DeadlockError                an acquire would close a cycle of tasks waiting on each other
     ├── NotFoundError                no such node or semaphore
     ├── AlreadyExistsError           the node or semaphore exists already
     ├── LimitExceededError           a named, configurable limit would be exceeded
     ├── PreconditionFailedError      the object is in a state that forbids the operation
     │    ├── FencedError             a guard refused a write: its fencing token is stale
     │    └── DuplicateTaskError      a task's unique key is held by another run of it
     ├── InvalidArgumentError         bad input, naming the argument (also a ValueError)
     │    └── ConfigError             a server setting cannot be used (names the setting)
     ├── AuthenticationError          missing or bad credentials
     ├── PermissionDeniedError        the credentials do not allow this operation
     ├── ProtocolError                the peer broke the wire protocol
     ├── UnavailableError             the backend cannot be reached, and why (also an OSError)
     │    ├── NotLeaderError          a cluster's standby: the leader is elsewhere (``leader``)
     │    ├── WrongCellError          a node another cell of the service serves (``cell``)
     │    └── RequestTimeoutError     a server answered no request in time: its connection replaced
     ├── UnsupportedError             this backend cannot do that (never silently weakened)
     └── CorruptLogError              the server's data directory cannot be trusted

Timeouts raise the built-in :class:`TimeoutError` (what was asked for did not happen
within the time the caller gave; a server that does not answer in time is
unavailable: :class:`RequestTimeoutError`); no tenure class shadows a built-in name
(hence :class:`AcquireCancelledError`, not ``CancelledError``: the task that awaits
an acquire being cancelled is still :class:`asyncio.CancelledError`).

Every message says what failed and why, naming the argument, setting, limit or
peer concerned: ``count must be an integer in [1, 2**64-1], got -1``, ``cannot
connect to 127.0.0.1:6388: connection refused``.

Each class carries an :class:`ErrorCode`, the number that travels on the wire,
so the core, the server and every client agree on one vocabulary. Two never
travel: :class:`ConfigError` and :class:`CorruptLogError` stop a server from
starting (``tenure serve`` reports them and exits).

Layer (CONTRIBUTING.md): its modules may import each other.
"""

from __future__ import annotations

import os
from typing import Final

from tenure.errors._base import ErrorCode, TenureError
from tenure.errors._unavailable import (
    NotLeaderError,
    RequestTimeoutError,
    UnavailableError,
    WrongCellError,
    leader_named,
)

# (Defined in the package's modules, each is tenure.errors' own: its repr and a pickle,
# a Celery result's, name it there, as they always did.)
for _defined_apart in (
    ErrorCode,
    TenureError,
    UnavailableError,
    NotLeaderError,
    WrongCellError,
    RequestTimeoutError,
):
    _defined_apart.__module__ = __name__


class LostError(TenureError):
    """Something the caller held (a session, lease, lock or leadership) has ended.

    This is the type of every ``.lost_reason`` and of the error an ``async with``
    block raises when its body was cancelled because of the loss.
    """


class SessionClosedError(LostError):
    """The session was closed, by its owner or because its client shut down.

    Using a closed session (or anything it held) raises it too. When the client
    was closed, the error is the more precise :class:`ClientClosedError`.
    """

    code = ErrorCode.SESSION_CLOSED


class ClientClosedError(SessionClosedError):
    """The client was closed: it takes no more calls, and its sessions ended with it.

    Raised by every call on a closed client (``client.session()``,
    ``describe_node()``..., the sync client's too), and the ``lost_reason`` of
    each session, lease, lock and leadership that the client's close ended.

    It is a :class:`SessionClosedError` on purpose, not a sibling: closing a
    client closes every session of it, so "this session is closed because its
    client is" is a refinement of "this session is closed", and every ``except
    SessionClosedError`` written before this class existed (it was what a closed
    client raised) still catches it. Catch ClientClosedError to tell the two apart.
    """


class ForkedClientError(ClientClosedError):
    """A client opened before ``os.fork``, used in the child: there it is closed.

    A child never uses its parent's connection or session (its requests would go
    out on the parent's socket, and closing would end the parent's session), so
    every call on an inherited asyncio client, or on any inherited session or lock,
    raises this error, before anything is sent; it is also the ``lost_reason`` of
    the inherited sessions and their locks, ended in the child alone (the parent
    keeps them). An inherited ``tenure.sync.Client`` does not raise it: its own calls
    open the child's connection (the sessions it opened in the parent still do).
    Open a new client in the child, or use the default one
    (``tenure.default_client()``, ``tenure.sync.default_client()``), which each
    process opens for itself. Closing an inherited client in the child only marks it
    closed there.
    """


class SessionExpiredError(LostError):
    """The server expired the session: it was not re-attached within its recovery window.

    Everything the session held was released and everything it waited for was
    cancelled.
    """

    code = ErrorCode.SESSION_EXPIRED


class LeaseLostError(LostError):
    """A lease ended without being released by its holder.

    Causes: the semaphore was deleted with ``force=True``, its node was dropped with
    ``force=True``, or a lease with a time-to-live was not renewed in time.
    """

    code = ErrorCode.LEASE_LOST


class LeaderChangedError(LeaseLostError):
    """Leadership ended, or the leader being observed was replaced."""

    code = ErrorCode.LEADER_CHANGED


class AcquireCancelledError(TenureError):
    """A queued acquire was withdrawn before it was granted: nothing is held.

    The server withdraws a waiting acquire when it is cancelled (CancelAcquire),
    when its session releases the semaphore, or when a newer acquire of the same
    session for the same semaphore supersedes it. It is not a :class:`LostError`
    (nothing was held, so nothing was lost) and not :class:`asyncio.CancelledError`
    (no task was cancelled): the client withdraws an acquire when the awaiting
    task is cancelled, and that task sees its own CancelledError, never this.
    """

    code = ErrorCode.CANCELLED


class DeadlockError(TenureError):
    """An acquire was refused at once: waiting would close a cycle of tasks that each
    wait for the next, none of which could ever go on (a deadlock).

    The message names the cycle: the sessions and tasks, and the semaphore each waits
    for (``session 5 (task 3) waits for 'b' held by session 7 (task 1), which waits for
    'a' held by session 5 (task 3)``). Nothing was queued and nothing changed; the
    others in the cycle keep waiting, and go on once this task gives up something
    they wait for: release what the task holds, then try again (or take the names
    together with ``session.lock_all``, which never deadlocks). Only a backend with
    ``Capability.DEADLOCK_DETECTION`` raises it (docs/recipes.md, "Deadlock detection").

    Not an :class:`AcquireCancelledError` on purpose: that one says someone withdrew
    a queued acquire (a cancel, a release, a newer acquire), which a caller may
    rightly ignore; a deadlock asks the caller to give something back, and an
    ``except AcquireCancelledError`` written before this class existed must not
    swallow it. Nothing is held by the refused acquire, so it is no :class:`LostError`.
    """

    code = ErrorCode.DEADLOCK


class NotFoundError(TenureError):
    """The named node, session or semaphore does not exist."""

    code = ErrorCode.NOT_FOUND


class AlreadyExistsError(TenureError):
    """The node or semaphore already exists."""

    code = ErrorCode.ALREADY_EXISTS


class LimitExceededError(TenureError):
    """A named, configurable limit would be exceeded (the message names the limit).

    Attributes:
        quota: on a server, the quota of a token (``sessions``, ``requests_per_second``...)
            or ``memory_budget`` that refused, as ``tenure_quota_refusals_total`` counts
            it; None for any other limit, and on a client (the wire carries the message).
    """

    code = ErrorCode.LIMIT_EXCEEDED
    quota: str | None = None

    @classmethod
    def by_quota(cls, quota: str, message: str) -> LimitExceededError:
        """The error of a refusal by ``quota`` (its :attr:`quota` set)."""
        error = cls(message)
        error.quota = quota
        return error


class PreconditionFailedError(TenureError):
    """The target's state forbids the operation (e.g. dropping a node with live sessions)."""

    code = ErrorCode.PRECONDITION_FAILED


class FencedError(PreconditionFailedError):
    """A fenced resource refused a write: its token is older than the newest it has seen.

    Raised by the guards of :mod:`tenure.fencing` when the writer's fencing token
    is lower than the highest token the resource has accepted: a newer holder of
    the lock has written since, so this writer's lock ended (it may not know yet,
    e.g. after a pause). Nothing of the refused write was applied. Retrying with the
    same token cannot succeed; take the lock again for a new token.

    It is a :class:`PreconditionFailedError` (the resource's state forbids the
    write) and never travels on the wire: the resource, not a tenure server,
    refuses.

    Attributes:
        resource: what the guard protects (a name, a key, a file).
        token: the refused writer's token.
        highest: the highest token the resource had accepted.
    """

    def __init__(self, resource: str, token: int, highest: int) -> None:
        super().__init__(
            f"write to {resource!r} refused: fencing token {token} is older than"
            f" {highest}, the highest this resource has accepted (a newer lock holder"
            " has written; take the lock again)"
        )
        self.resource = resource
        self.token = token
        self.highest = highest


class DuplicateTaskError(PreconditionFailedError):
    """A task that must not run twice at once found its key taken by another run of it.

    Raised by :mod:`tenure.contrib.celery`'s ``Singleton`` tasks with
    ``on_duplicate="raise"``: in the worker, when a task starts while another with
    the same key runs; with ``mode="enqueue"``, at ``apply_async`` while another is
    queued or running. It never travels on the wire. Its arguments are its
    attributes, so a Celery result backend carries it whole to the caller.

    Attributes:
        task: the task's name.
        key: the name of the lock (or claim) the task needed.
        running: the id of the task that holds it, None if it could not be read.
    """

    def __init__(self, task: str, key: str, running: str | None = None) -> None:
        super().__init__(task, key, running)
        self.task = task
        self.key = key
        self.running = running

    def __str__(self) -> str:
        holder = "another task" if self.running is None else f"task {self.running}"
        return f"{self.task} is a duplicate: {self.key!r} is held by {holder}"


class InvalidArgumentError(TenureError, ValueError):
    """An argument is malformed or out of range (the message names it)."""

    code = ErrorCode.INVALID_ARGUMENT


class ConfigError(InvalidArgumentError):
    """A server setting has a value that cannot be used; the message names the setting.

    Settings are the arguments of ``tenure serve`` (a flag, an environment
    variable, a key of the config file, or a file it names: TLS, auth), hence an
    InvalidArgumentError, and a ValueError. It stops the server from starting and
    never travels on the wire (a client never receives it).
    """


class AuthenticationError(TenureError):
    """Credentials are missing or wrong."""

    code = ErrorCode.AUTHENTICATION


class PermissionDeniedError(TenureError):
    """The credentials are valid but do not allow this operation."""

    code = ErrorCode.PERMISSION_DENIED


class ProtocolError(TenureError):
    """The peer sent something the wire protocol does not allow."""

    code = ErrorCode.PROTOCOL


class UnsupportedError(TenureError):
    """The chosen backend cannot provide this feature; tenure refuses rather than weakens."""

    code = ErrorCode.UNSUPPORTED


class CorruptLogError(TenureError):
    """The server's data directory cannot be trusted; start-up stops rather than lose data.

    The message names the file, the problem and, when known, the byte offset. It
    never travels on the wire: a server that cannot read its log does not start.

    Attributes:
        path: the file (or directory) found wrong.
        offset: byte offset of the problem in ``path``, or None.
        problem: what is wrong, in words.
    """

    def __init__(self, path: str | os.PathLike[str], offset: int | None, problem: str) -> None:
        where = "" if offset is None else f" at byte offset {offset}"
        super().__init__(f"{os.fspath(path)}: {problem}{where}")
        self.path = path
        self.offset = offset
        self.problem = problem


# ConfigError, CorruptLogError, FencedError, DuplicateTaskError and RequestTimeoutError
# have no code of their own (they never travel).
_BY_CODE: Final[dict[ErrorCode, type[TenureError]]] = {
    cls.code: cls
    for cls in (
        TenureError,
        SessionClosedError,
        SessionExpiredError,
        LeaseLostError,
        LeaderChangedError,
        AcquireCancelledError,
        DeadlockError,
        NotFoundError,
        AlreadyExistsError,
        LimitExceededError,
        PreconditionFailedError,
        InvalidArgumentError,
        AuthenticationError,
        PermissionDeniedError,
        ProtocolError,
        UnavailableError,
        NotLeaderError,
        WrongCellError,
        UnsupportedError,
    )
}


def error_from_code(code: int, message: str) -> BaseException:
    """Build the exception that a wire error ``code`` stands for.

    ``TIMEOUT`` maps to the built-in :class:`TimeoutError`; unknown codes map to
    :class:`TenureError` so a newer server never crashes an older client.
    """
    if code == ErrorCode.TIMEOUT:
        return TimeoutError(message)
    try:
        cls = _BY_CODE.get(ErrorCode(code), TenureError)
    except ValueError:
        cls = TenureError
    return cls(message)


def code_of(error: BaseException) -> ErrorCode:
    """The wire code for ``error`` (the inverse of :func:`error_from_code`)."""
    if isinstance(error, TenureError):
        return error.code
    if isinstance(error, TimeoutError):
        return ErrorCode.TIMEOUT
    return ErrorCode.INTERNAL


__all__ = [
    "AcquireCancelledError",
    "AlreadyExistsError",
    "AuthenticationError",
    "ClientClosedError",
    "ConfigError",
    "CorruptLogError",
    "DeadlockError",
    "DuplicateTaskError",
    "ErrorCode",
    "FencedError",
    "ForkedClientError",
    "InvalidArgumentError",
    "LeaderChangedError",
    "LeaseLostError",
    "LimitExceededError",
    "LostError",
    "NotFoundError",
    "NotLeaderError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "ProtocolError",
    "RequestTimeoutError",
    "SessionClosedError",
    "SessionExpiredError",
    "TenureError",
    "UnavailableError",
    "UnsupportedError",
    "WrongCellError",
    "code_of",
    "error_from_code",
    "leader_named",
]
