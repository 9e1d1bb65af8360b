"""Who blocks a name on the wire: WhyName's reply, WhyReport, and TopNames', TopReport
(protocol version 9; a chain link's ``waits_elsewhere``, version 10).

WhyName and TopNames are engine commands (:mod:`tenure._protocol.payload_commands`);
their replies and the records inside them are here, so that the reply values' module
stays about the values every lock uses. A server always knows what its holders wait for:
``waiting_for``, ``chain`` and ``roots`` are nil only in reports a client makes for a
store that does not (they never travel so from a server).
"""

from __future__ import annotations

from typing import Final

from tenure._core.top_report import NameStat, TopReport
from tenure._core.why_report import WhyHolder, WhyLink, WhyReport, WhyRoot, WhyWait, WhyWaiter
from tenure._protocol.payload_records import CLIENT_IDENTITY, OPT_FLOAT
from tenure._protocol.wire import BOOL, FLOAT, STR, UINT, ArrayOf, Optional, Record

__all__ = [
    "NAME_STAT",
    "TOP_REPORT",
    "WHY_HOLDER",
    "WHY_LINK",
    "WHY_REPORT",
    "WHY_ROOT",
    "WHY_WAIT",
    "WHY_WAITER",
]

WHY_WAIT: Final = Record(WhyWait, [("node", STR), ("name", STR), ("position", UINT)])
WHY_HOLDER: Final = Record(
    WhyHolder,
    [
        ("session_id", UINT),
        ("description", STR),
        ("identity", CLIENT_IDENTITY),
        ("address", STR),
        ("count", UINT),
        ("token", UINT),
        ("held_for", OPT_FLOAT),
        ("max_hold_ends_in", OPT_FLOAT),
        ("waiting_for", Optional(ArrayOf(WHY_WAIT))),
    ],
)
WHY_WAITER: Final = Record(
    WhyWaiter,
    [
        ("session_id", UINT),
        ("description", STR),
        ("identity", CLIENT_IDENTITY),
        ("address", STR),
        ("count", UINT),
        ("position", UINT),
        ("waiting_for", OPT_FLOAT),
    ],
)
#: (Version 10 added the trailing ``waits_elsewhere``: what a holder waits for in
#: other nodes, through other sessions of its client process.)
WHY_LINK: Final = Record(
    WhyLink,
    [
        ("node", STR),
        ("name", STR),
        ("session_id", UINT),
        ("waits_on", ArrayOf(STR)),
        ("waits_elsewhere", ArrayOf(WHY_WAIT)),
    ],
    since=4,
)
WHY_ROOT: Final = Record(
    WhyRoot,
    [
        ("node", STR),
        ("name", STR),
        ("session_id", UINT),
        ("description", STR),
        ("identity", CLIENT_IDENTITY),
        ("address", STR),
        ("held_for", FLOAT),
    ],
)
#: WhyName's reply (a reply value: tag 13).
WHY_REPORT: Final = Record(
    WhyReport,
    [
        ("node", STR),
        ("name", STR),
        ("holders", ArrayOf(WHY_HOLDER)),
        ("waiters", ArrayOf(WHY_WAITER)),
        ("chain", Optional(ArrayOf(WHY_LINK))),
        ("roots", Optional(ArrayOf(WHY_ROOT))),
        ("holders_total", UINT),
        ("waiters_total", UINT),
        ("cut", BOOL),
    ],
    tag=13,
)
NAME_STAT: Final = Record(
    NameStat,
    [
        ("node", STR),
        ("name", STR),
        ("wait_seconds", FLOAT),
        ("queued", UINT),
        ("grants", UINT),
        ("timeouts", UINT),
        ("cancelled", UINT),
        ("losses", UINT),
        ("queue", UINT),
        ("holders", UINT),
        ("longest_hold", OPT_FLOAT),
        ("wait_p50", OPT_FLOAT),
        ("wait_p99", OPT_FLOAT),
        ("hold_p50", OPT_FLOAT),
        ("hold_p99", OPT_FLOAT),
        ("kept_for", FLOAT),
        ("error", UINT),
    ],
)
#: TopNames' reply (a reply value: tag 14).
TOP_REPORT: Final = Record(
    TopReport,
    [
        ("node", STR),
        ("window", FLOAT),
        ("sort", STR),
        ("names", ArrayOf(NAME_STAT)),
        ("kept", UINT),
        ("capacity", UINT),
        ("evicted", UINT),
    ],
    tag=14,
)
