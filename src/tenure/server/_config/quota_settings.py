"""The settings of quotas per token and of the memory budget (issue 37).

Rows of the settings table (:data:`tenure.server._config.settings.SETTINGS` includes
them). The ``quota_*`` settings are the server-wide defaults of the quotas each
token of the auth file has (its own ``[token.quota]`` table says otherwise), and
apply only with ``--auth-file``: without one there are no tokens to count by.
``--memory-budget`` applies with or without one. What each quota counts is in
:mod:`tenure._core.quotas`; docs/operations.md ("Quotas and limits") has the table.
"""

from __future__ import annotations

from typing import Final

from tenure._core.quotas import QUOTA_NAMES, Quota
from tenure.server._config.setting import Setting, in_range

__all__ = ["QUOTA_SETTINGS", "READ_ONLY_QUOTA", "default_quota"]

#: What a read-only token may hold unless its own ``[token.quota]`` says otherwise
#: (it may watch, not hoard): at most 100 sessions, a 5-minute recovery window,
#: 10,000 watches and 100 prefix watches of them (a prefix watch fires on every
#: change under its prefix: each costs every writer of its node a push; each lower if
#: the server-wide default is lower).
READ_ONLY_QUOTA: Final = Quota(
    sessions=100, watches=10_000, prefix_watches=100, recovery_window=300.0
)


def _count(name: str, what: str) -> Setting:
    return Setting(
        "quota_" + name,
        int,
        0,
        "N",
        f"with --auth-file: the {what} one token may have at once, unless its "
        f"[token.quota] {name} says otherwise; over it a command is refused LIMIT_EXCEEDED "
        "naming the quota and the token; 0: no quota (default: %(default)s)",
        in_range(0),
    )


QUOTA_SETTINGS: Final = (
    _count("sessions", "sessions (open, attached or detached)"),
    _count("watches", "watches armed (semaphore and prefix watches)"),
    _count("waiters", "acquires queued"),
    _count("semaphores", "semaphores it created that exist"),
    _count("nodes", "nodes it created that exist"),
    _count(
        "data_bytes",
        "bytes of data, names, identities and keys (semaphore names and data, holder and "
        "waiter data, sessions' descriptions, identities and keys, watched names, node "
        "names and annexes)",
    ),
    _count(
        "prefix_watches",
        "prefix watches armed (also counted in --quota-watches; read-only tokens: 100)",
    ),
    Setting(
        "quota_recovery_window",
        float,
        0.0,
        "SECONDS",
        "with --auth-file: the longest recovery window (session timeout) one token may "
        "ask, unless its [token.quota] recovery_window says otherwise; 0: no quota "
        "(read-only tokens: 300) (default: %(default)s)",
        in_range(0),
    ),
    Setting(
        "quota_requests_per_second",
        float,
        0.0,
        "N",
        "with --auth-file: the commands per second one token may send, over all its "
        "connections (a token bucket whose burst is one second's worth), unless its "
        "[token.quota] requests_per_second says otherwise; 0: no quota "
        "(default: %(default)s)",
        in_range(0),
    ),
    Setting(
        "memory_budget",
        int,
        0,
        "BYTES",
        "the most the server's state may take, as the engine estimates it (a cost per "
        "session, semaphore, node, waiter, watch and hold, plus every byte data_bytes "
        "counts: data, names, identities, keys; "
        "docs/operations.md): past it, commands that add state are refused "
        "LIMIT_EXCEEDED naming the budget, while reads, renewals, releases, detaches, "
        "closes and deletes keep working; 0: no budget (default: %(default)s)",
        in_range(0),
    ),
)


def default_quota(config: object) -> Quota:
    """The server-wide default quota of a token: ``config``'s ``quota_*`` settings
    (a :class:`~tenure.server._config.serve_config.ServeConfig`; 0 is none)."""
    values = [getattr(config, "quota_" + name) for name in QUOTA_NAMES]
    return Quota.of([value if value else None for value in values])
