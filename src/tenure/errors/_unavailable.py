"""The errors of a service that cannot serve a request now, and where it points the
client instead: a standby naming its leader, a cell naming the node's cell
(:mod:`tenure.errors`, which re-exports them).
"""

from __future__ import annotations

from typing import Final

from tenure.errors._base import ErrorCode, TenureError

__all__ = [
    "CELL_MARK",
    "EPOCH_MARK",
    "LEADER_MARK",
    "NotLeaderError",
    "RequestTimeoutError",
    "UnavailableError",
    "WrongCellError",
    "leader_named",
]


class UnavailableError(TenureError, OSError):
    """The backend cannot be reached right now; the message says which and why.

    For instance ``cannot connect to 127.0.0.1:6388: connection refused``, or
    ``...: connected, but no answer to Hello within 5 s``. Trying again later may
    succeed, unlike a :class:`ClientClosedError`.
    """

    code = ErrorCode.UNAVAILABLE


class NotLeaderError(UnavailableError):
    """This server of a cluster does not lead (a standby, or a leader that stepped down).

    The message names the leader as ``leader=HOST:PORT`` when the server knows it
    (``leader=`` when no leader is elected): :attr:`leader` reads it back, and a
    ``tenure://`` client listing several servers goes there
    (docs/protocol.md section 16). It is an :class:`UnavailableError`: code written
    for a single server treats it as one that cannot serve now.
    """

    code = ErrorCode.NOT_LEADER

    @classmethod
    def pointing_to(cls, leader: str | None, why: str) -> NotLeaderError:
        """The error saying ``why``, naming ``leader`` (its advertised address; None:
        none is known) in the form :attr:`leader` reads."""
        return cls(f"{LEADER_MARK}{leader or ''} ({why})")

    @property
    def leader(self) -> str | None:
        """The leader's address, as the server named it (None: it named none)."""
        return leader_named(str(self))


#: How a NOT_LEADER message names the leader: ``leader=HOST:PORT``, the first such word.
LEADER_MARK: Final = "leader="


def leader_named(message: str) -> str | None:
    """The ``HOST:PORT`` a NOT_LEADER message names (``leader=HOST:PORT``), None if none."""
    at = message.find(LEADER_MARK)
    if at < 0:
        return None
    word = message[at + len(LEADER_MARK) :].split(" ", 1)[0].strip()
    return word or None


class WrongCellError(UnavailableError):
    """This cell of a service does not serve the node: another cell does (docs/cluster.md,
    "Cells").

    The message names the cell and the epoch of the node's place as ``cell=CELL
    epoch=N`` (:attr:`cell`, :attr:`epoch`): a ``tenure://`` client sends the node's
    requests to that cell's members from then on (docs/protocol.md section 17). It
    is an :class:`UnavailableError`: code written for a single server treats it as a
    server that cannot serve this now.
    """

    code = ErrorCode.WRONG_CELL

    @classmethod
    def pointing_to(cls, node: str, cell: str, epoch: int) -> WrongCellError:
        """The error saying that cell ``cell`` serves ``node`` (its place's ``epoch``),
        in the form :attr:`cell` and :attr:`epoch` read."""
        return cls(f"{CELL_MARK}{cell} {EPOCH_MARK}{epoch} (node {node!r} is served by that cell)")

    @property
    def cell(self) -> str:
        """The cell that serves the node, as the server named it ("": none named)."""
        return _word_after(str(self), CELL_MARK) or ""

    @property
    def epoch(self) -> int:
        """The epoch of the node's place the server knew (0: none named)."""
        word = _word_after(str(self), EPOCH_MARK)
        return int(word) if word is not None and word.isdigit() else 0


#: How a WRONG_CELL message names the cell and the epoch: ``cell=CELL epoch=N``.
CELL_MARK: Final = "cell="
EPOCH_MARK: Final = "epoch="


def _word_after(message: str, mark: str) -> str | None:
    at = message.find(mark)
    if at < 0:
        return None
    return message[at + len(mark) :].split(" ", 1)[0].strip() or None


class RequestTimeoutError(UnavailableError):
    """A ``tenure://`` server did not answer a request within the client's
    ``request_timeout`` (a server that answers its Pings, but not its requests).

    The request may or may not have been applied; the connection was closed and is
    made again, as after any lost connection (its sessions re-attached within their
    recovery windows), and the requests in flight on it were cut off with it. It is
    an :class:`UnavailableError`, not a built-in :class:`TimeoutError`, which says
    that a wait the caller bounded ran out (a lock found busy, a latch still
    counting): ``except TimeoutError`` around an acquire must not take a server that
    does not answer for a busy lock. It never travels (the client's own).
    """
