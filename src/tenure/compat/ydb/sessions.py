"""YDB session streams: start and re-attach, pings, stop, and how a stream ends.

A stream starts a session (``session_id`` 0) or re-attaches one. The rules are
YDB's (docs/ydb.md): a recovery timeout of at most 30 minutes; a protection key of
at most 16 bytes, checked on re-attach only if the session was started with one; a
re-attach with a ``seq_no`` lower than the session's last is BAD_SESSION, an equal
one is taken; the stream the session is taken from gets BAD_SESSION. The engine's
session keeps tenure's rules underneath: its key is the YDB key behind a prefix
(the engine takes no empty key), and its ``seq_no`` is the YDB ``seq_no`` in its high
32 bits and a count of attaches in the low ones, so it grows with every attach and
the rule survives a restart.

The server pings every stream (a third of its session's timeout, at most
``--ydb-ping-interval``, in time the server could hear: its own stalls are not
counted); a stream that sent nothing since the last ping is ended with TIMEOUT.
Any message counts as an answer: YDB's Python SDK answers a ping with a ping. A
stream ends with a ``Failure`` (YDB's session-level errors) or with
``SessionStopped``; its session is detached when it ends any other way, and expires
if no stream re-attaches it within its timeout.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
from collections.abc import Callable
from typing import Any, Final

from tenure._core import (
    AcquireFailed,
    AttachSession,
    CancelWatch,
    CloseSession,
    Command,
    CreateSession,
    DetachSession,
    Effect,
    Granted,
    SessionEnded,
    WatchFired,
)
from tenure._core.session import digest_key
from tenure._core.values import ClientIdentity
from tenure.compat.ydb import _protos as pb
from tenure.compat.ydb.metrics import YdbCounts
from tenure.compat.ydb.paths import Database, OutsideDatabaseError
from tenure.compat.ydb.pipe import frame
from tenure.compat.ydb.semaphores import SEMAPHORE_REQUESTS, SemaphoreRequests
from tenure.compat.ydb.steps import admit_request
from tenure.compat.ydb.stream import SessionStream
from tenure.errors import ErrorCode, TenureError, code_of
from tenure.server.plug import (
    Auditor,
    Connection,
    HostCalls,
    Tokens,
    denial,
    peer_host,
    record_quota_refusal,
    take_back_denial,
)

#: The longest session timeout YDB takes (30 minutes), in milliseconds.
MAX_SESSION_TIMEOUT_MS: Final = 1_800_000
#: The longest protection key YDB takes, in bytes.
MAX_PROTECTION_KEY_BYTES: Final = 16
#: Before every YDB protection key in the engine (which takes no empty key).
KEY_PREFIX: Final = b"ydb:"
#: The largest ``seq_no`` that fits the high half of the engine's.
MAX_SEQ_NO: Final = 2**32 - 1
#: The shortest ping interval (YDB's: 10 ms), in seconds.
MIN_PING_INTERVAL: Final = 0.01

_Response = pb.coordination.SessionResponse


class YdbSessions:
    """The session streams of the YDB face (see the module docstring)."""

    def __init__(
        self,
        host: HostCalls,
        database: Database,
        send: Callable[[Connection, bytes], None],
        finish: Callable[[Connection], None],
        attach: Callable[[int], None],
        forget: Callable[[int], None],
        ping_interval: float,
        observer: YdbCounts | None = None,
        audit: Auditor | None = None,
        tokens: Tokens | None = None,
    ) -> None:
        """``observer``: told of each request answered (None: not measured); ``audit``:
        where a refusal by a quota or the memory budget is recorded (None: off);
        ``tokens``: the auth file's (whose is a session a stream takes back: None,
        without an auth file)."""
        self.audit = audit
        self.tokens = tokens
        self.host = host
        self.database = database
        self._send_bytes = send
        self._finish = finish
        self._attach = attach
        self._forget = forget
        self.ping_interval = ping_interval
        self.observer = observer
        self.semaphores = SemaphoreRequests(host, self._execute, self.send, self.refused)
        #: The stream each session is attached to (its effects go there).
        self.by_session: dict[int, SessionStream] = {}

    # -- answers -------------------------------------------------------------------------

    def send(self, stream: SessionStream, response: Any) -> None:
        """Queue a ``SessionResponse`` (sent after the commit that covers it)."""
        if stream.closing:
            return
        self._send_bytes(stream, frame(response))
        if self.observer is not None:
            answered = _answered(response)
            if answered is not None:
                self.observer.request(*answered)

    def fail(self, stream: SessionStream, status: int, why: str) -> None:
        """End the stream with a ``Failure`` (its session, if any, is detached)."""
        self.send(stream, _Response(failure={"status": status, "issues": pb.issues(why)}))
        self.end(stream)

    def end(self, stream: SessionStream) -> None:
        """End the stream once what it is owed is sent; its session is detached."""
        if stream.pinger is not None:
            stream.pinger.cancel()
            stream.pinger = None
        sid = stream.session_id
        if sid and self.by_session.get(sid) is stream:
            del self.by_session[sid]
            if sid in self.host.engine.sessions and not self.host.dead:
                # YDB counts the session's timeout from the end of its stream.
                with contextlib.suppress(TenureError, pb.StatusError):
                    self._execute(stream, DetachSession(sid))
        stream.acquires.clear()
        stream.watches.clear()
        self._finish(stream)  # (sets ``closing``: nothing more is queued for it)

    # -- messages --------------------------------------------------------------------------

    def start(self, stream: SessionStream, start: Any) -> None:
        """The stream's first message: start a session, or re-attach one."""
        try:
            admit_request(self.host, stream.token)  # (its token's rate: one per request)
            if start.timeout_millis > MAX_SESSION_TIMEOUT_MS:
                raise pb.StatusError(pb.Status.BAD_REQUEST, "Session timeout is out of range")
            if len(start.protection_key) > MAX_PROTECTION_KEY_BYTES:
                raise pb.StatusError(pb.Status.BAD_REQUEST, "Protection key is too large")
            if start.seq_no > MAX_SEQ_NO:
                why = f"seq_no above {MAX_SEQ_NO} is not supported"
                raise pb.StatusError(pb.Status.BAD_REQUEST, why)
            if not start.path:  # YDB's check, before any lookup
                raise pb.StatusError(pb.Status.BAD_REQUEST, "KesusPath cannot be empty")
            try:
                stream.node = self.database.node_of(start.path)
            except OutsideDatabaseError as error:
                why = f"Coordination node not found: {error}"
                raise pb.StatusError(pb.Status.NOT_FOUND, why) from None
            if start.session_id:
                sid, timeout = self._reattach(stream, start)
            else:
                sid, timeout = self._create(stream, start)
        except pb.StatusError as error:
            self.refused(stream, error, "SessionStart")
            self.fail(stream, error.status, str(error))
            return
        except (TenureError, TimeoutError) as error:
            self.refused(stream, error, "SessionStart")
            code = code_of(error)
            status = pb.Status.NOT_FOUND if code is ErrorCode.NOT_FOUND else pb.status_of(code)
            self.fail(stream, status, str(error))
            return
        stream.session_id = sid
        self.by_session[sid] = stream
        self._attach(sid)
        started = {"session_id": sid, "timeout_millis": round(timeout * 1000)}
        self.send(stream, _Response(session_started=started))
        interval = min(max(timeout / 3, MIN_PING_INTERVAL), self.ping_interval)
        self._schedule_ping(stream, interval)

    def _create(self, stream: SessionStream, start: Any) -> tuple[int, float]:
        command = CreateSession(
            stream.node,
            KEY_PREFIX + start.protection_key,
            timeout=_timeout(start.timeout_millis),
            description=start.description,
            identity=ClientIdentity(host=_host_of(stream.peer), name="ydb"),
        )
        info = self._execute(stream, command)
        if start.seq_no:  # YDB takes the start's seq_no as the session's last one
            attach = AttachSession(info.session_id, command.protection_key, start.seq_no << 32)
            self._execute(stream, attach)
        return info.session_id, info.timeout

    def _reattach(self, stream: SessionStream, start: Any) -> tuple[int, float]:
        sid = start.session_id
        session = self.host.engine.sessions.get(sid)
        if session is None or session.node != stream.node:
            raise pb.StatusError(pb.Status.SESSION_EXPIRED, "Session does not exist")
        last = session.seq_no >> 32
        if start.seq_no < last:
            raise pb.StatusError(pb.Status.BAD_SESSION, "Attach request is out of sequence")
        # (The engine keeps the key's digest: the key is the one it was started with,
        # none, or the one this start gives, whichever the digest is of.)
        key = KEY_PREFIX
        if not hmac.compare_digest(session.key_digest, digest_key(key)):
            key = KEY_PREFIX + start.protection_key
            if not hmac.compare_digest(session.key_digest, digest_key(key)):
                why = "Attach request protection key mismatch"
                raise pb.StatusError(pb.Status.BAD_SESSION, why)
        seq_no = start.seq_no << 32 if start.seq_no > last else session.seq_no + 1
        # YDB takes the re-attaching start's timeout and description as the session's.
        attach = AttachSession(
            sid, key, seq_no, _timeout(start.timeout_millis), description=start.description
        )
        info = self._execute(stream, attach)
        # Watches an earlier stream armed are dropped, as YDB drops them on re-attach.
        for watch_id in sorted(session.watches):
            self._execute(stream, CancelWatch(sid, watch_id))
        previous = self.by_session.get(sid)
        if previous is not None and previous is not stream:
            del self.by_session[sid]
            previous.session_id = 0  # its end must not detach the session
            self.fail(previous, pb.Status.BAD_SESSION, "Session stolen by another client")
        return sid, info.timeout

    def stop(self, stream: SessionStream) -> None:
        """``SessionStop``: close the session (releasing all it holds), then end the stream."""
        sid = stream.session_id
        try:
            admit_request(self.host, stream.token)  # (refused: the stream ends, detached)
        except pb.StatusError as error:
            self.refused(stream, error, "SessionStop")
            self.fail(stream, error.status, str(error))
            return
        stream.acquires.clear()  # YDB answers none of a stopped session's queued acquires
        try:
            self._execute(stream, CloseSession(sid))
        except (TenureError, TimeoutError) as error:
            self.fail(stream, pb.status_of(code_of(error)), str(error))
            return
        self.by_session.pop(sid, None)
        self._forget(sid)
        self.semaphores.resent.forget(sid)
        stream.session_id = 0
        self.send(stream, _Response(session_stopped={"session_id": sid}))
        self.end(stream)

    def handle(self, stream: SessionStream, request: Any) -> None:
        """A message after the start (any message answers the server's ping)."""
        stream.heard = True
        kind = request.WhichOneof("request")
        if kind in SEMAPHORE_REQUESTS:
            self.semaphores.handle(stream, kind, getattr(request, kind))
        elif kind == "ping":
            # (Keepalives are no requests: no token's rate counts a ping or a pong, as
            # refusing one would end an honest session: tenure.server._net.token_rates.)
            self.send(stream, _Response(pong={"opaque": request.ping.opaque}))
        elif kind == "pong":
            pass  # heard: enough (see the module docstring)
        elif kind == "session_stop":
            self.stop(stream)
        elif kind == "session_start":
            self.fail(stream, pb.Status.BAD_REQUEST, "Session cannot be started twice")
        elif kind is None:
            self.fail(stream, pb.Status.BAD_REQUEST, "Empty request")
        else:
            self.fail(stream, pb.Status.BAD_REQUEST, f"Unimplemented request ({kind})")

    # -- engine effects and pings ----------------------------------------------------------

    def deliver(self, effect: Effect) -> None:
        """An engine effect of a YDB session: to its stream, if it has one now."""
        if type(effect) is SessionEnded:
            self.semaphores.resent.forget(effect.session_id)  # attached or not
        stream = self.by_session.get(effect.session_id)
        if stream is None or stream.closing:
            return  # detached: what its old stream waited for is not sent (YDB's rule)
        if type(effect) is SessionEnded:
            del self.by_session[effect.session_id]
            stream.session_id = 0
            if effect.code is ErrorCode.SESSION_EXPIRED:
                status, why = pb.Status.SESSION_EXPIRED, "Session has expired"
            else:  # its node was dropped: YDB's streams lose their tablet
                status, why = pb.Status.UNAVAILABLE, f"Link failure: {effect.message}"
            self.fail(stream, status, why)
        elif isinstance(effect, Granted | AcquireFailed | WatchFired):
            self.semaphores.deliver(stream, effect)
        # (A LeaseLost is not told: YDB's owners lose a force-deleted semaphore silently.)

    def _schedule_ping(self, stream: SessionStream, interval: float) -> None:
        # On the engine's clock: a stall of the server moves the next look on, so the
        # answers that waited in the socket meanwhile are read first (guarantees 6e).
        clock = self.host.clock
        stream.pinger = clock.call_at(clock.now() + interval, lambda: self._ping(stream, interval))

    def _ping(self, stream: SessionStream, interval: float) -> None:
        stream.pinger = None
        if stream.closing:
            return
        if not stream.heard:
            self.fail(stream, pb.Status.TIMEOUT, "Ping timeout")
            return
        stream.heard = False
        opaque = secrets.randbits(63) | 1  # non-zero
        self.send(stream, _Response(ping={"opaque": opaque}))
        self._schedule_ping(stream, interval)

    def refused(self, stream: SessionStream, error: BaseException, request: str) -> None:
        """Record ``error`` in the audit log if a quota of the stream's token, or the
        memory budget, refused its ``request`` (as the native face does)."""
        token = stream.token.name if stream.token is not None else None
        address = peer_host(stream.peer) if stream.peer else None
        record_quota_refusal(
            self.audit, error, token=token, address=address, via="ydb", request=request
        )

    def _execute(self, stream: SessionStream, command: Command[Any]) -> Any:
        """Apply ``command`` for ``stream``, as its token may (UNAUTHORIZED if it may not;
        a re-attach as the session's use needs too: ``take_back_denial``)."""
        if stream.token is not None:
            node = stream.node or None
            why = denial(stream.token, command, node)
            if why is None and isinstance(command, AttachSession):
                session = self.host.engine.sessions.get(command.session_id)
                why = take_back_denial(stream.token, command, session, self.tokens)
            if why is not None:
                raise pb.StatusError(pb.Status.UNAUTHORIZED, why)
        # (The server's metrics count what the engine applied, from any protocol; what
        # the command makes is the token's, and counts against its quotas.)
        return self.host.execute(command, stream.token.name if stream.token else "")


#: The responses that answer a request, and the request they answer (for metrics).
_ANSWERS: Final = {
    "session_started": "session_start",
    "session_stopped": "session_stop",
    "failure": "session",
    "acquire_semaphore_result": "acquire_semaphore",
    "release_semaphore_result": "release_semaphore",
    "describe_semaphore_result": "describe_semaphore",
    "create_semaphore_result": "create_semaphore",
    "update_semaphore_result": "update_semaphore",
    "delete_semaphore_result": "delete_semaphore",
}


def _answered(response: Any) -> tuple[str, str] | None:
    """(request, status) of a response that answers one (None: a ping, a Pending...)."""
    kind = response.WhichOneof("response")
    request = _ANSWERS.get(kind)
    if request is None:
        return None
    # (SessionStarted and SessionStopped carry no status: they are successes.)
    status = getattr(getattr(response, kind), "status", pb.Status.SUCCESS)
    name = pb.Status.StatusCode.Name(status)
    return request, name.lower()


def _timeout(millis: int) -> float:
    """A session timeout in seconds: YDB's 0 (expire at once when detached) is 1 ms,
    the shortest the engine keeps."""
    return max(millis, 1) / 1000


def _host_of(peer: str) -> str:
    """The client's address in a gRPC peer string (``ipv4:127.0.0.1:5000``)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return peer
