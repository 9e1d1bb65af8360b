"""What the YDB face counts: its requests and calls answered, by request and status.

:class:`YdbCounts` is the face's observer (its registry entry makes one per server
process; the face reaches it as ``plug.observer_as(YdbCounts)``): the face counts each
answer here, and ``/metrics`` shows ``tenure_ydb_requests_total{request,status}``. Its
label values come from fixed sets (others count as ``other``), so a client cannot grow
the series. It imports neither grpc nor YDB's messages.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from tenure.server.plug import CounterFamily

#: The YDB face's requests and calls (label values: a bounded set; others count as
#: ``other``), and its statuses (YDB's status names, lower case; others: ``other``).
REQUESTS: Final = frozenset(
    {"create_node", "alter_node", "drop_node", "describe_node", "list_endpoints"}
    | {"who_am_i", "login", "session_start", "session_stop", "session"}
    | {"acquire_semaphore", "release_semaphore", "describe_semaphore"}
    | {"create_semaphore", "update_semaphore", "delete_semaphore"}
    | {"create_resource", "alter_resource", "drop_resource", "list_resources"}
    | {"describe_resource", "acquire_resource"}
)
STATUSES: Final = frozenset(
    {"success", "bad_request", "unauthorized", "internal_error", "aborted", "unavailable"}
    | {"overloaded", "scheme_error", "generic_error", "timeout", "bad_session"}
    | {"precondition_failed", "already_exists", "not_found", "session_expired"}
    | {"cancelled", "unsupported"}
)


class YdbCounts:
    """YDB requests and calls answered, by (request, status)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, ...], int] = {}

    def request(self, request: str, status: str) -> None:
        """A YDB request or call (``acquire_semaphore``, ``create_node``...) was answered
        with a YDB status (``success``, ``not_found``...)."""
        key = (
            request if request in REQUESTS else "other",
            status if status in STATUSES else "other",
        )
        self.counts[key] = self.counts.get(key, 0) + 1

    def families(self) -> Iterator[CounterFamily]:
        """The one counter, as ``/metrics`` shows it."""
        yield CounterFamily(
            "tenure_ydb_requests",
            "YDB requests and calls answered (--ydb-port), by request and YDB status.",
            ("request", "status"),
            dict(self.counts),
        )
