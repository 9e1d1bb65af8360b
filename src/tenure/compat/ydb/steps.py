"""The writes of one YDB rate-limiter call: in an engine session of their own, all or none.

The semaphore commands need a session; a rate-limiter call is in none of its
client's (YDB's calls are unary). So a call that changes something opens a session
for its writes and closes it when they are done, in the same step of the server:
no other command runs in between, so nobody sees the session, and it never
outlives the call. A crash between the two (a commit that kept the one and not the
other) would leave it to expire :data:`_WINDOW` after the restart; no answer was
sent then. A write that fails (a node's limit, a token's access) undoes the ones
before it, in the same step, before its error goes on.

What every request of a token's goes through, on any of the face's calls, is here
too: its rate first (:func:`admit_request`), then its access (:func:`authorize`).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Final

from tenure._core import (
    CloseSession,
    Command,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    SwapSemaphoreData,
    UpdateSemaphore,
)
from tenure._core.values import ClientIdentity
from tenure.compat.ydb import _protos as pb
from tenure.errors import LimitExceededError
from tenure.server.plug import HostCalls, Token, denial, peer_host

#: The protection key of a step's session (nobody attaches it).
_KEY: Final = b"ydb-rate-limiter"
#: A step's session's recovery window, in seconds (see the module docstring).
_WINDOW: Final = 1.0


class WriteStep:
    """The engine session of one call's writes (see the module docstring); ``peer``:
    the call's client (gRPC's name of it), whose host names the session's client.

    The writes are all or none: when one fails (a node's limit, a token's access), those
    made before it are undone, in the same step, before the error goes on.
    """

    def __init__(self, host: HostCalls, token: Token | None, node: str, peer: str) -> None:
        self.host = host
        self.token = token
        self.node = node
        self.peer = peer
        self.sid = 0
        self._undo: list[Command[Any]] = []

    def __enter__(self) -> WriteStep:
        identity = ClientIdentity(host=peer_host(self.peer), name="ydb")
        opened = CreateSession(
            self.node,
            _KEY,
            timeout=_WINDOW,
            description="YDB rate limiter call",
            identity=identity,
        )
        self.sid = self._run(opened).session_id
        return self

    def create(self, name: str, data: bytes) -> None:
        """Create the persistent semaphore ``name`` (limit 1) holding ``data``."""
        self._run(CreateSemaphore(self.sid, name, 1, data))
        self._undo.append(DeleteSemaphore(self.sid, name, force=True))

    def write(self, name: str, old: bytes, new: bytes) -> None:
        """Replace the data ``old`` of semaphore ``name`` (read in this step) with ``new``."""
        if new == old:
            return
        if not self._run(SwapSemaphoreData(self.sid, name, old, new)):
            # (Cannot happen: nothing runs between the call's read and its writes.)
            raise pb.StatusError(pb.Status.ABORTED, f"rate limiter {name!r} changed meanwhile")
        self._undo.append(UpdateSemaphore(self.sid, name, old))

    def delete(self, name: str, old: bytes) -> None:
        """Delete the semaphore ``name``, whose data is ``old``."""
        self._run(DeleteSemaphore(self.sid, name, force=True))
        self._undo.append(CreateSemaphore(self.sid, name, 1, old))

    def _run(self, command: Command[Any]) -> Any:
        """Apply ``command``, as the call's token may (UNAUTHORIZED if it may not)."""
        authorize(self.token, command, self.node)
        return self.host.execute(command, self.token.name if self.token else "")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            if error is not None:
                for command in reversed(self._undo):  # (each gives back what its write took)
                    self.host.execute(command)
        finally:
            self.host.execute(CloseSession(self.sid))


def authorize(token: Token | None, command: Command[Any], node: str) -> None:
    """Refuse UNAUTHORIZED what ``token`` may not do (None: anonymous, no auth file)."""
    why = None if token is None else denial(token, command, node)
    if why is not None:
        raise pb.StatusError(pb.Status.UNAUTHORIZED, why)


def admit_request(host: HostCalls, token: Token | None) -> None:
    """Count one request of ``token``'s (a unary call, a Session stream's start or
    message; None: anonymous, not counted) against its ``requests_per_second``, before
    any of its work (:meth:`tenure.server.plug.HostCalls.admit_request`).

    Raises:
        pb.StatusError: OVERLOADED past it (YDB's status for a throughput limit, which
            its SDKs retry after a backoff), naming the quota and the token.
    """
    if token is None:
        return
    try:
        host.admit_request(token.name)
    except LimitExceededError as error:
        # (Its cause kept: the audit log names the quota, record_quota_refusal.)
        raise pb.StatusError(pb.Status.OVERLOADED, str(error)) from error
