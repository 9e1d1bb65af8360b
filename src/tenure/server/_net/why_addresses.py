"""The addresses in a WhyName's answer: where the server sees each session's client.

The engine knows no connection (:mod:`tenure._core.blocking` leaves ``address``
empty); the native face does: a session attached to one of its connections is at that
connection's peer address (its host part: a reconnection takes a new port). A
detached session, or one whose client reached the server some other way (YDB's face,
dflockd's), stays "". The face fills them in before the reply leaves
(:mod:`tenure.server._net.native`), as it alone knows the session table; and hides
what the chain met in nodes the asking token may not read
(:func:`~tenure._core.why_report.hidden`), before the addresses, so that none of
theirs is looked up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tenure._core.why_report import WhyReport, hidden
from tenure.server._net.auth import Token
from tenure.server._net.gate import Conn

__all__ = ["with_addresses"]


def with_addresses(
    report: WhyReport, owner: Callable[[int], Conn | None], token: Token | None = None
) -> WhyReport:
    """``report`` as ``token`` may read it (None: anything), with each holder's,
    waiter's and root's ``address``: the host of the connection ``owner(session_id)``
    gives (None: detached, ""; a hidden root, session 0, has none)."""
    if token is not None and token.nodes is not None:
        report = hidden(report, token.may_touch)

    def at(session_id: int) -> str:
        conn = owner(session_id) if session_id else None
        return "" if conn is None else conn.host

    return replace(
        report,
        holders=tuple(replace(h, address=at(h.session_id)) for h in report.holders),
        waiters=tuple(replace(w, address=at(w.session_id)) for w in report.waiters),
        roots=None
        if report.roots is None
        else tuple(replace(r, address=at(r.session_id)) for r in report.roots),
    )
