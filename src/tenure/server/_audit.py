"""The audit log (``--audit-log PATH|-``): one JSON line per administrative act and refusal.

Who created, altered or dropped a node, who ended a session, who failed to log in,
whose command a quota or the memory budget refused (and, recorded by their own
commands, who reloaded the server or took a backup): each is one line, as
docs/operations.md ("Audit log") states the format::

    {"time": "2026-11-26T11:30:00.123Z", "act": "node_create", "token": "ops",
     "address": "10.0.0.7", "outcome": "ok", "what": {"node": "jobs"}}

A part of the server that does or refuses such an act calls :meth:`AuditLog.record`
on the event loop, where it knows the token and the client's address: the native face
(:mod:`tenure.server._net.native`), the dashboard's "end session", the throttle of
failed logins (every listener's), and the reload and backup commands. The record
holds a token's *name*, never its secret: no caller passes a secret, and nothing a
client sends is recorded but the names it gave (a node's, a command's) and an
address.

**The server never waits on it.** :meth:`AuditLog.record` builds the line and puts it
on a bounded queue (``--audit-log-queue`` lines) that one writer thread empties, a
batch of what is queued at a time, flushed once per batch; when the queue is full, or
the file cannot be written, the line is dropped and counted (:attr:`AuditLog.dropped`,
``tenure_audit_lines_dropped_total`` on ``/metrics``), so a slow or full disk costs
lines, never a turn of the loop. The file is opened by the thread too (a FIFO nobody
reads blocks only the thread).

**Shares of the queue.** A refusal (a line whose outcome is not ``ok``: a denied
command, a failed login, a quota's refusal) is what a hostile client can make without
end; an act that succeeded is what an operator needs to find. So the refusals queued
at once may fill at most :data:`REFUSALS_SHARE` of the queue together, and those of
one sender (a token, or the address of a client that has none) at most
:data:`SENDER_SHARE` of it: past either, a refusal is dropped and counted, and the
rest of the queue is kept for acts that succeeded and for other senders. A flood of
a read-only token's refusals dropped 58 % of an admin's ``node_create`` lines.

**Rotation by size.** When a line would take the file past ``--audit-log-max-bytes``,
the file is renamed ``PATH.1`` (``PATH.1`` to ``PATH.2``, ..., the oldest past
``--audit-log-keep`` removed) and a new one begun, as logrotate's ``rotate N`` keeps
them; 0 bytes: never rotated. ``-`` writes to standard output (the server's own log is
on standard error), never rotated.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Final

log = logging.getLogger("tenure.server")

__all__ = ["ACTS", "STDOUT", "AuditLog"]

#: ``--audit-log -``: the lines go to standard output.
STDOUT: Final = "-"
#: The acts the server records (docs/operations.md, "Audit log"); ``reload`` and
#: ``backup`` are recorded by those commands.
ACTS: Final = frozenset(
    {
        "node_create",
        "node_alter",
        "node_annex",
        "node_drop",
        "kill_session",
        "denied",
        "auth_failed",
        "quota_refused",
        "reload",
        "backup",
        "long_hold",
    }
)
#: A string of ``what`` longer than this is cut (names are bounded by the engine's
#: limits already; this bounds a line whatever a caller passes).
MAX_TEXT: Final = 1024
#: How long :meth:`AuditLog.close` waits for the thread to write what is queued.
CLOSE_TIMEOUT: Final = 5.0
#: Put on the queue by :meth:`AuditLog.close`: the thread stops when it reaches it.
_STOP: Final = b""
#: How much of the queue the refusals may fill together (the rest: acts that succeeded).
REFUSALS_SHARE: Final = 1 / 2
#: How much of the queue one sender's refusals may fill (a token's, or an address's).
SENDER_SHARE: Final = 1 / 16
#: The lines the thread writes at most between two flushes.
BATCH: Final = 1024


def _utc_now() -> str:
    """The time now, ISO 8601 in UTC to the millisecond (``2026-11-26T11:30:00.123Z``)."""
    now = time.time()
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    return f"{seconds}.{int(now % 1 * 1000):03d}Z"


def _bounded(value: object) -> object:
    """``value`` as JSON-ready data, its strings cut at :data:`MAX_TEXT` characters."""
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "..."
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_bounded(item) for item in value]
    if isinstance(value, dict):
        return {str(_bounded(str(key))): _bounded(item) for key, item in value.items()}
    return _bounded(str(value))


class AuditLog:
    """The audit log of one ``tenure serve`` process (module docstring).

    ``target``: a file's path, ``-`` (standard output) or ``""`` (off: :meth:`record`
    does nothing). ``max_bytes``: rotate past this size (0: never); ``keep``: the
    rotated files kept; ``queue_size``: lines waiting for the thread, at most.
    ``clock`` gives each line's time (a test's clock; the wall clock otherwise).
    """

    def __init__(
        self,
        target: str = "",
        *,
        max_bytes: int = 0,
        keep: int = 0,
        queue_size: int = 1,
        clock: Callable[[], str] = _utc_now,
    ) -> None:
        self.target = target
        self.max_bytes = max_bytes
        self.keep = keep
        self._clock = clock
        size = max(1, queue_size)
        # Each line with its sender if it is a refusal (None: an act that succeeded).
        self._queue: queue.Queue[tuple[str | None, bytes]] = queue.Queue(maxsize=size)
        self._full = 0  # lines dropped on a full queue or past a share (on the loop)
        self._failed = 0  # lines the thread could not write (counted by the thread)
        # The refusals queued, in all and by sender (the loop adds, the thread takes).
        self._refusals_cap = max(1, int(size * REFUSALS_SHARE))
        self._sender_cap = max(1, int(size * SENDER_SHARE))
        self._refusals = 0
        self._by_sender: dict[str, int] = {}
        self._shares = threading.Lock()
        self._warned = False  # (the thread's: a write failure logged once)
        #: Lines written (by the thread).
        self.written = 0
        self._thread: threading.Thread | None = None
        if target:
            self._thread = threading.Thread(target=self._run, name="tenure-audit", daemon=True)
            self._thread.start()

    @classmethod
    def from_config(cls, config: object) -> AuditLog:
        """The audit log ``config``'s ``audit_log*`` settings ask for (a ServeConfig)."""
        return cls(
            str(getattr(config, "audit_log", "")),
            max_bytes=int(getattr(config, "audit_log_max_bytes", 0)),
            keep=int(getattr(config, "audit_log_keep", 0)),
            queue_size=int(getattr(config, "audit_log_queue", 1)),
        )

    @property
    def on(self) -> bool:
        """Whether lines are recorded at all (``--audit-log`` given)."""
        return self._thread is not None

    @property
    def dropped(self) -> int:
        """Lines dropped: the queue was full, or the thread could not write them."""
        return self._full + self._failed

    def record(
        self,
        act: str,
        *,
        token: str | None,
        address: str | None,
        outcome: str,
        **what: object,
    ) -> None:
        """Record one act: ``act`` (one of :data:`ACTS`), by the token named ``token``
        (None: no auth file, or none known), from ``address`` (the client's IP address;
        None: not from a client, such as a signal), with ``outcome`` (``ok``, or why
        it was refused: an error code's name in lower case); ``what`` names what it
        acted on (JSON-ready values). Never waits: a full queue drops the line.

        A refusal (``outcome`` not ``ok``) is dropped past its share of the queue
        (module docstring): the sender is ``token``, else ``address``.

        Never pass a secret here: the line is written as given.
        """
        if self._thread is None:
            return
        sender = None if outcome == "ok" else f"token {token}" if token else f"@{address}"
        if sender is not None and not self._take_share(sender):
            self._full += 1
            return
        line = {
            "time": self._clock(),
            "act": act,
            "token": token,
            "address": address,
            "outcome": outcome,
            "what": {name: _bounded(value) for name, value in what.items()},
        }
        data = json.dumps(line, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
        try:
            self._queue.put_nowait((sender, data))
        except queue.Full:
            self._full += 1
            if sender is not None:
                self._give_share(sender)

    def _take_share(self, sender: str) -> bool:
        """Count one refusal of ``sender`` queued, if the shares have room for it."""
        with self._shares:
            held = self._by_sender.get(sender, 0)
            if self._refusals >= self._refusals_cap or held >= self._sender_cap:
                return False
            self._refusals += 1
            self._by_sender[sender] = held + 1
            return True

    def _give_share(self, sender: str) -> None:
        """One refusal of ``sender`` left the queue (written, failed or never put)."""
        with self._shares:
            self._refusals -= 1
            held = self._by_sender[sender] - 1
            if held:
                self._by_sender[sender] = held
            else:
                del self._by_sender[sender]

    def close(self, timeout: float = CLOSE_TIMEOUT) -> None:
        """Write what is queued (waiting up to ``timeout``), then stop the thread.

        A thread stuck on its file (a FIFO nobody reads, a hung disk) is left behind:
        it is a daemon, and what it had not written is lost with the process.
        """
        thread, self._thread = self._thread, None
        if thread is None:
            return
        deadline = time.monotonic() + timeout
        try:
            self._queue.put((None, _STOP), timeout=timeout)
        except queue.Full:
            return  # (stuck: what is queued is lost with the process)
        thread.join(max(0.0, deadline - time.monotonic()))

    # -- the thread ---------------------------------------------------------------------

    def _batch(self) -> list[tuple[str | None, bytes]]:
        """The next lines queued: waits for one, then takes what else is there (at most
        :data:`BATCH`), so that a burst is written with one flush, not one a line."""
        batch = [self._queue.get()]
        with contextlib.suppress(queue.Empty):
            while len(batch) < BATCH and batch[-1][1]:
                batch.append(self._queue.get_nowait())
        return batch

    def _run(self) -> None:
        out: BinaryIO | None = None
        size = 0
        stopping = False
        while not stopping:
            unflushed = 0  # lines of this batch written to the buffer, not yet flushed
            for sender, data in self._batch():
                if sender is not None:
                    self._give_share(sender)
                if not data:  # (_STOP: every line has at least its braces)
                    stopping = True
                    break
                try:
                    if out is None:
                        out, size = self._open()
                    if self.max_bytes and size and size + len(data) > self.max_bytes:
                        out.close()  # (flushes the batch so far)
                        out = None
                        self.written += unflushed
                        unflushed = 0
                        self._rotate()
                        out, size = self._open()
                    out.write(data)
                    size += len(data)
                    unflushed += 1
                except OSError as error:
                    self._failed += 1 + unflushed  # (what the buffer held is lost too)
                    unflushed = 0
                    self._failed_on(out, error)
                    out = None
            try:
                if out is not None:
                    out.flush()
                self.written += unflushed
            except OSError as error:
                self._failed += unflushed
                self._failed_on(out, error)
                out = None
        if out is not None and out is not sys.stdout.buffer:
            out.close()

    def _failed_on(self, out: BinaryIO | None, error: OSError) -> None:
        """``out`` could not be written: closed (the caller opens one afresh), and
        the error logged, once (a full disk would say it for every line)."""
        if out is not None and out is not sys.stdout.buffer:
            with contextlib.suppress(OSError):
                out.close()
        if not self._warned:
            self._warned = True
            log.error(
                "cannot write the audit log: %s (lines are dropped and counted "
                "in tenure_audit_lines_dropped_total)",
                error,
                extra={"event": "audit_log_failed", "fields": {"path": self.target}},
            )
        return

    def _open(self) -> tuple[BinaryIO, int]:
        """The file to append to, and its size now."""
        if self.target == STDOUT:
            return sys.stdout.buffer, 0
        out = open(self.target, "ab")  # noqa: SIM115 (kept open by the thread)
        try:
            size = os.fstat(out.fileno()).st_size
        except OSError:
            out.close()
            raise
        return out, size

    def _rotate(self) -> None:
        """``PATH`` becomes ``PATH.1``, each ``PATH.N`` ``PATH.N+1``; past ``keep``, gone."""
        path = Path(self.target)
        if self.keep == 0:
            path.unlink(missing_ok=True)
            return
        oldest = path.with_name(f"{path.name}.{self.keep}")
        oldest.unlink(missing_ok=True)
        for number in range(self.keep - 1, 0, -1):
            older = path.with_name(f"{path.name}.{number}")
            if older.exists():
                older.rename(path.with_name(f"{path.name}.{number + 1}"))
        path.rename(path.with_name(f"{path.name}.1"))
