"""What the dflockd face counts: its requests answered, by command and answer.

:class:`DflockdCounts` is the face's observer (its registry entry makes one per
server process; the face reaches it as ``plug.observer_as(DflockdCounts)``): the face
counts each answered request here, and ``/metrics`` shows
``tenure_dflockd_requests_total{command,result}``. Its label values come from fixed
sets, so a client cannot grow the series.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tenure.server.plug import CounterFamily

#: dflockd's commands (other command lines count as ``unknown``, unframable ones as
#: ``invalid``) and the first words of its answers: the label values are bounded.
COMMANDS: Final = frozenset(
    {"l", "sl", "r", "sr", "n", "sn", "e", "se", "w", "sw"}
    | {"stats", "ping", "barrier", "auth", "stable-ref"}
)
RESULTS: Final = frozenset(
    {"ok", "acquired", "queued", "timeout", "error", "error_auth", "error_max_locks"}
    | {"error_max_waiters", "error_limit_mismatch", "error_not_enqueued"}
    | {"error_already_enqueued", "error_lease_expired", "error_draining"}
)


class DflockdCounts:
    """dflockd requests answered, by (command, first word of the answer)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, ...], int] = {}

    def request(self, command: str, answer: bytes) -> None:
        """A request (its command line, as sent; "" if it could not be framed) was
        answered ``answer``."""
        word = answer.split(maxsplit=1)[0].decode("ascii", "replace") if answer.strip() else ""
        key = (
            command if command in COMMANDS else ("unknown" if command else "invalid"),
            word if word in RESULTS else "other",
        )
        self.counts[key] = self.counts.get(key, 0) + 1

    def families(self) -> Iterator[CounterFamily]:
        """The one counter, as ``/metrics`` shows it."""
        yield CounterFamily(
            "tenure_dflockd_requests",
            "dflockd requests answered, by command and the first word of the answer.",
            ("command", "result"),
            dict(self.counts),
        )
