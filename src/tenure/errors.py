"""The one exception tree of tenure.

Every error tenure raises on purpose derives from :class:`TenureError`::

    TenureError
     ├── LostError                    something you held has ended without your say-so
     │    ├── SessionClosedError      the session was closed (by you, or its client shut down)
     │    ├── SessionExpiredError     the server expired the session (recovery window passed)
     │    └── LeaseLostError          a lease ended: semaphore deleted, node dropped, lease TTL
     │         └── LeaderChangedError leadership ended or the observed leader changed
     ├── NotFoundError                no such node or semaphore
     ├── AlreadyExistsError           the node or semaphore exists already
     ├── LimitExceededError           a named, configurable limit would be exceeded
     ├── PreconditionFailedError      the object is in a state that forbids the operation
     ├── InvalidArgumentError         bad input (also a ValueError)
     ├── AuthenticationError          missing or bad credentials
     ├── PermissionDeniedError        the credentials do not allow this operation
     ├── ProtocolError                the peer broke the wire protocol
     ├── UnavailableError             the backend cannot be reached (also an OSError)
     └── UnsupportedError             this backend cannot do that (never silently weakened)

Timeouts raise the built-in :class:`TimeoutError`; no tenure class shadows a
built-in name.

Each class carries an :class:`ErrorCode`, the number that travels on the wire,
so the core, the server and every client agree on one vocabulary.
"""

from __future__ import annotations

import enum
from typing import ClassVar, Final


class ErrorCode(enum.IntEnum):
    """Wire codes of the errors; stable across versions (new codes are only added)."""

    INTERNAL = 1
    SESSION_CLOSED = 10
    SESSION_EXPIRED = 11
    LEASE_LOST = 12
    LEADER_CHANGED = 13
    NOT_FOUND = 20
    ALREADY_EXISTS = 21
    LIMIT_EXCEEDED = 22
    PRECONDITION_FAILED = 23
    INVALID_ARGUMENT = 24
    TIMEOUT = 25
    CANCELLED = 26
    AUTHENTICATION = 30
    PERMISSION_DENIED = 31
    PROTOCOL = 40
    UNAVAILABLE = 41
    UNSUPPORTED = 42


class TenureError(Exception):
    """Base class of every error tenure raises on purpose."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL


class LostError(TenureError):
    """Something the caller held (a session, lease, lock or leadership) has ended.

    This is the type of every ``.lost_reason`` and of the error an ``async with``
    block raises when its body was cancelled because of the loss.
    """


class SessionClosedError(LostError):
    """The session was closed, by its owner or because its client shut down."""

    code = ErrorCode.SESSION_CLOSED


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


class NotFoundError(TenureError):
    """The named node, session or semaphore does not exist."""

    code = ErrorCode.NOT_FOUND


class AlreadyExistsError(TenureError):
    """The node or semaphore already exists."""

    code = ErrorCode.ALREADY_EXISTS


class LimitExceededError(TenureError):
    """A named, configurable limit would be exceeded (the message names the limit)."""

    code = ErrorCode.LIMIT_EXCEEDED


class PreconditionFailedError(TenureError):
    """The target's state forbids the operation (e.g. dropping a node with live sessions)."""

    code = ErrorCode.PRECONDITION_FAILED


class InvalidArgumentError(TenureError, ValueError):
    """An argument is malformed or out of range (the message names it)."""

    code = ErrorCode.INVALID_ARGUMENT


class AuthenticationError(TenureError):
    """Credentials are missing or wrong."""

    code = ErrorCode.AUTHENTICATION


class PermissionDeniedError(TenureError):
    """The credentials are valid but do not allow this operation."""

    code = ErrorCode.PERMISSION_DENIED


class ProtocolError(TenureError):
    """The peer sent something the wire protocol does not allow."""

    code = ErrorCode.PROTOCOL


class UnavailableError(TenureError, OSError):
    """The backend cannot be reached right now."""

    code = ErrorCode.UNAVAILABLE


class UnsupportedError(TenureError):
    """The chosen backend cannot provide this feature; tenure refuses rather than weakens."""

    code = ErrorCode.UNSUPPORTED


_BY_CODE: Final[dict[ErrorCode, type[TenureError]]] = {
    cls.code: cls
    for cls in (
        TenureError,
        SessionClosedError,
        SessionExpiredError,
        LeaseLostError,
        LeaderChangedError,
        NotFoundError,
        AlreadyExistsError,
        LimitExceededError,
        PreconditionFailedError,
        InvalidArgumentError,
        AuthenticationError,
        PermissionDeniedError,
        ProtocolError,
        UnavailableError,
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
    "AlreadyExistsError",
    "AuthenticationError",
    "ErrorCode",
    "InvalidArgumentError",
    "LeaderChangedError",
    "LeaseLostError",
    "LimitExceededError",
    "LostError",
    "NotFoundError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "ProtocolError",
    "SessionClosedError",
    "SessionExpiredError",
    "TenureError",
    "UnavailableError",
    "UnsupportedError",
    "code_of",
    "error_from_code",
]
