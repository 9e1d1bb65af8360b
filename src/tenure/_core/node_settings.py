"""A node's settings: :class:`NodeConfig`, its renamed settings, and a server's ceilings.

What a node is created with and altered to (``create_node``, ``alter_node``, the
CLI's ``--set``), checked here before the engine takes it; the ceilings a server
puts on every limit (``tenure serve --max-node-*``). Public through
:mod:`tenure._core.values`, which re-exports every name of this module, as it does
the limits and the checks; how a config is stored is :mod:`tenure._core.stored_config`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from tenure._core.checks import check_duration, check_long_hold, check_max_hold
from tenure._core.limits import MAX_RECOVERY_WINDOW
from tenure.errors import InvalidArgumentError, LimitExceededError

__all__ = [
    "DEFAULT_NODE_CEILINGS",
    "RENAMED_SETTINGS",
    "NodeConfig",
    "check_ceilings",
    "renamed_settings",
]

#: Settings of NodeConfig that were renamed: the old name -> today's. The old name
#: still works where users type it (NodeConfig.replace, create_node, alter_node, the
#: CLI's --set), with a DeprecationWarning; stored data and the wire keep it (see
#: tenure._core.stored_config).
RENAMED_SETTINGS: Final = {"session_timeout": "recovery_window"}


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Settings of a coordination node; every limit is named here and enforced by the engine.

    Attributes:
        recovery_window: seconds a session whose client went silent is kept before it
            expires (its holds released), for sessions that do not choose their own.
            Named ``session_timeout`` before (that name still works in ``replace``,
            with a DeprecationWarning).
        lock_delay: after a holder *failed* (its session or lease expired), no grant
            on that semaphore happens for this many seconds (Chubby's lock-delay).
        default_lease: if set, every grant on this node lasts this many seconds
            unless renewed; ``None`` means a grant lasts as long as its session.
        max_sessions: live sessions attached to the node.
        max_semaphores: semaphores in the node (persistent and ephemeral).
        max_waiters: queued acquires per semaphore.
        max_data_size: bytes of semaphore data and of each owner's data.
        max_watches_per_session: armed watches one session may hold.
        max_missed_per_session: endings of acquires and grants a session did not
            cause (timeouts, deletions, lease expiries) that the node keeps for its
            client to read back after a re-attach, one per semaphore, the oldest
            dropped first (see DescribeSession).
        max_claims: live claims (``session.claim``) in the node, released ones
            included until they end (:mod:`tenure._core.claims`).
        max_hold: if set, every grant on this node ends this many seconds after it
            was made, on the store's clock, whatever its session does (renewals and
            keep-alives do not extend it); an acquire's own ``max_hold`` may only
            shorten it. ``None``: no bound. At most ``MAX_HOLD_SECONDS``.
        long_hold: the node's own long-hold threshold, in seconds: a hold of this
            node held this long or longer is told of once (a ``long_hold`` line in the
            server's log and audit log, ``tenure_long_holds_total``), whatever the
            server's ``--long-hold-seconds`` (higher or lower). ``0``: no hold of
            this node is ever told of (a node of elections, whose leaders hold for
            hours). ``None``: the server's ``--long-hold-seconds`` applies. Only a
            tenure server tells of long holds (``Capability.LONG_HOLDS``): elsewhere
            a node with this set is refused (UnsupportedError). At most
            ``MAX_HOLD_SECONDS``.
    """

    recovery_window: float = 30.0
    lock_delay: float = 0.0
    default_lease: float | None = None
    max_sessions: int = 10_000
    max_semaphores: int = 100_000
    max_waiters: int = 10_000
    max_data_size: int = 65_536
    max_watches_per_session: int = 1_000
    max_missed_per_session: int = 256
    max_claims: int = 10_000
    max_hold: float | None = None
    long_hold: float | None = None

    def validated(self) -> NodeConfig:
        """Return ``self`` if every field is in range, else raise InvalidArgumentError."""
        check_duration("recovery_window", self.recovery_window, maximum=MAX_RECOVERY_WINDOW)
        check_duration("lock_delay", self.lock_delay, allow_zero=True)
        if self.default_lease is not None:
            check_duration("default_lease", self.default_lease)
        check_max_hold(self.max_hold)
        check_long_hold(self.long_hold)
        for name in (
            "max_sessions",
            "max_semaphores",
            "max_waiters",
            "max_data_size",
            "max_watches_per_session",
            "max_missed_per_session",
            "max_claims",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
        return self

    def replace(self, **changes: object) -> NodeConfig:
        """A copy with ``changes`` applied and validated; unknown names are rejected.

        A renamed setting's old name (``session_timeout``) is still taken, with a
        DeprecationWarning naming the new one.
        """
        changes = renamed_settings(changes, stacklevel=2)
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise InvalidArgumentError(f"unknown node setting(s): {', '.join(unknown)}")
        return dataclasses.replace(self, **changes).validated()  # type: ignore[arg-type]


#: The most each node limit may be on a server that does not set its own ceilings
#: (``tenure serve --max-node-*``): high enough for every use, low enough that no
#: limit is one in name only (a limit of 2**63 never stops anything).
DEFAULT_NODE_CEILINGS: Final[Mapping[str, int]] = {
    "max_sessions": 1_000_000,
    "max_semaphores": 1_000_000,
    "max_waiters": 1_000_000,
    "max_data_size": 16 * 1024 * 1024,
    "max_watches_per_session": 100_000,
    "max_missed_per_session": 100_000,
    "max_claims": 1_000_000,
}


def check_ceilings(
    config: NodeConfig, ceilings: Mapping[str, int], *, only: Mapping[str, object] | None = None
) -> None:
    """Raise LimitExceededError if a limit of ``config`` (of those named in ``only``,
    if given) is above its ceiling.

    ``ceilings`` maps a NodeConfig field to the most it may be (a server's
    ``--max-node-*`` setting: ``max_semaphores`` is ``--max-node-semaphores``).
    """
    for name, ceiling in ceilings.items():
        if only is not None and name not in only:
            continue
        value = getattr(config, name)
        if value > ceiling:
            flag = "--max-node-" + name.removeprefix("max_").replace("_", "-")
            raise LimitExceededError(
                f"{name} ({value}) is above this server's ceiling of {ceiling} ({flag})"
            )


def renamed_settings(changes: Mapping[str, object], *, stacklevel: int = 2) -> dict[str, object]:
    """``changes`` with each old setting name (RENAMED_SETTINGS) under today's name.

    Each old name warns (DeprecationWarning, ``stacklevel`` as :func:`warnings.warn`'s,
    counted from the caller of this function); both names of one setting at once is
    InvalidArgumentError, since which one was meant cannot be known.
    """
    out = dict(changes)
    for old, new in RENAMED_SETTINGS.items():
        if old not in out:
            continue
        if new in out:
            raise InvalidArgumentError(f"{old} and {new} name the same setting: give {new} only")
        warnings.warn(
            f"the node setting {old} is now called {new}; {old} will be removed",
            DeprecationWarning,
            stacklevel=stacklevel + 1,
        )
        out[new] = out.pop(old)
    return out
