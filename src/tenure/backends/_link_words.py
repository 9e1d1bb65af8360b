"""What a link says about connections that failed: in words, never empty. [compiled]

:func:`describe_error` says what went wrong with one connection (the str of an
OSError names a system call, that of a timeout is empty); :func:`attempt_error` is
the error of an attempt over a service's doors (:mod:`tenure.backends._doors`) that
connected nowhere, naming each door and why it failed.
"""

from __future__ import annotations

import errno
import re
import socket
import ssl
from typing import Final

from tenure._protocol import LocalProtocolError
from tenure.backends._doors import Door, DoorRound, Doors
from tenure.errors import InvalidArgumentError, TenureError, UnavailableError

__all__ = [
    "attempt_error",
    "describe_error",
    "failure_words",
    "not_a_cluster",
    "refused_locally",
    "standby_words",
]


def describe_error(error: BaseException) -> str:
    """What went wrong, in words, never empty.

    The str of an OSError names the call that failed ("Connect call failed
    ('127.0.0.1', 6388)"), and that of a timeout is empty: say what happened
    instead, and fall back on the str, or the type's name, only for the rest.
    """
    if isinstance(error, TenureError):
        return str(error) or type(error).__name__
    if isinstance(error, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(error, ConnectionResetError):
        return "connection reset by peer"
    if isinstance(error, ConnectionAbortedError):
        return "connection aborted"
    if isinstance(error, BrokenPipeError):
        return "broken pipe (the peer closed the connection)"
    if isinstance(error, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed ({error.reason}): {error.verify_message}"
    if isinstance(error, ssl.SSLError):
        return f"TLS error: {error.reason or str(error) or type(error).__name__}"
    if isinstance(error, socket.gaierror):
        return f"cannot resolve the host name: {error.strerror or error}"
    if isinstance(error, TimeoutError) and error.errno == errno.ETIMEDOUT:
        return "connection timed out (the host did not answer)"
    if isinstance(error, TimeoutError) and not str(error):
        return "timed out"
    if isinstance(error, OSError) and error.strerror:
        return error.strerror[:1].lower() + error.strerror[1:]
    return str(error) or type(error).__name__


#: "cannot encode Request.command(Acquire).count: -1 is outside ...": the codec's words.
_CODEC_FIELD: Final = re.compile(r"cannot encode Request\.command\((\w+)\)\.")


def refused_locally(error: LocalProtocolError) -> InvalidArgumentError:
    """The codec would not send an argument: an InvalidArgumentError naming the field.

    The client checks every argument before it gets here (tenure.client._args);
    this keeps anything it missed a plain InvalidArgumentError, in the user's terms.
    """
    text = str(error)
    match = _CODEC_FIELD.match(text)
    if match is not None:
        text = f"{text[match.end() :]} (the wire cannot carry it in {match.group(1)})"
    return InvalidArgumentError(text)


def failure_words(endpoint: Door, error: BaseException) -> str:
    """Why ``endpoint`` could not be used, without naming it again."""
    text = describe_error(error)
    for prefix in (f"cannot connect to {endpoint}: ", f"{endpoint} "):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def not_a_cluster(version: int) -> str:
    """Why a standalone server cannot be one of several doors (the message says the
    door: each of them is named by the attempt's error)."""
    old = f" speaking protocol version {version}" if version < 3 else ""
    return (
        f"a standalone server{old}, not a cluster's door (a tenure:// URL of several "
        "servers names one cluster; for independent servers add ?sharded=true)"
    )


def standby_words(leader: str | None) -> str:
    """Why a standby could not be used, and where it sent the link."""
    if leader is None:
        return "a standby, which knows no leader now"
    return f"a standby, naming the leader {leader}"


def attempt_error(doors: Doors, attempt: DoorRound, errors: list[BaseException]) -> BaseException:
    """The error of an attempt that connected nowhere.

    One server tried: its own error, as a link of one door always raised. Several:
    one error naming each and why it failed, of their common type if they all failed
    alike for a reason of their own (a wrong token everywhere is AuthenticationError),
    else UnavailableError.
    """
    if not attempt.hopped:
        return errors[-1]
    kinds = {type(error) for error in errors}
    kind: type[TenureError] = UnavailableError
    if len(kinds) == 1:
        only = kinds.pop()
        if issubclass(only, TenureError) and not issubclass(only, UnavailableError):
            kind = only
    said = "; ".join(f"{endpoint}: {why}" for endpoint, why in attempt.failures)
    return kind(f"cannot connect to any of {doors}: {said}")
