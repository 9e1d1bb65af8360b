"""What ``why`` answers: who blocks a name (:class:`WhyReport` and its parts).

The values only; :mod:`tenure._core.blocking` makes them from an engine's state, and
a client makes them from a describe where the store does not know what a holder waits
for (``tenure.client._why``). Public as ``tenure.WhyReport`` and the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from tenure._core.values import NO_IDENTITY, ClientIdentity

__all__ = ["WhyHolder", "WhyLink", "WhyReport", "WhyRoot", "WhyWait", "WhyWaiter", "hidden"]


@dataclass(frozen=True, slots=True)
class WhyWait:
    """A request a holder has queued: on ``name`` of ``node``, at ``position`` in its
    queue (1: served next; 0: not counted, past the look limit)."""

    node: str
    name: str
    position: int


@dataclass(frozen=True, slots=True)
class WhyHolder:
    """One hold of the name: its session, its client's ``address`` (where the server
    sees its connection; "" where nothing connects it: detached, in-process, or a store
    that does not say), the tokens, the fencing token, how long it
    has been held (seconds; None where the store keeps no time of grant), in how long
    its ``max_hold`` ends it (None: no bound, or a store that does not say), and
    what its holder waits for (:class:`WhyWait`, in the order they began; None where
    the store does not know what a holder waits for)."""

    session_id: int
    description: str
    identity: ClientIdentity
    address: str
    count: int
    token: int
    held_for: float | None
    max_hold_ends_in: float | None
    waiting_for: tuple[WhyWait, ...] | None = ()


@dataclass(frozen=True, slots=True)
class WhyWaiter:
    """One queued request of the name (its session's ``address`` as a holder's), at
    ``position`` (1: next), asking ``count``
    tokens, waiting for ``waiting_for`` seconds so far (None where the store keeps no
    time of arrival)."""

    session_id: int
    description: str
    identity: ClientIdentity
    address: str
    count: int
    position: int
    waiting_for: float | None


@dataclass(frozen=True, slots=True)
class WhyLink:
    """A (name, holder) the chain met: ``session_id`` holds ``name`` of ``node`` and
    waits for ``waits_on`` (names of the same node) and ``waits_elsewhere`` (names of
    other nodes, where the same task of the same client process waits through
    another session: :class:`WhyWait`, each with its place); both empty: a root."""

    node: str
    name: str
    session_id: int
    waits_on: tuple[str, ...] = ()
    waits_elsewhere: tuple[WhyWait, ...] = ()


@dataclass(frozen=True, slots=True)
class WhyRoot:
    """A holder the chain met that waits for nothing: what everyone behind waits on
    (its session's ``address`` as a holder's)."""

    node: str
    name: str
    session_id: int
    description: str
    identity: ClientIdentity
    address: str
    held_for: float


@dataclass(frozen=True, slots=True)
class WhyReport:
    """Who blocks ``name`` of ``node`` (module docstring).

    ``holders`` and ``waiters`` are a page (``limit`` of each; the waiters after the
    ``after``-th); ``holders_total`` and ``waiters_total`` say how many there are.
    ``chain`` is every (name, holder) met from the name's holders on, breadth first
    (``limit`` at most);
    ``roots`` those that wait for nothing (both None where the store does not know
    what a holder waits for). ``cut``: the walk stopped at its look limit (the chain,
    the roots and the places in queues may be incomplete).
    """

    node: str
    name: str
    holders: tuple[WhyHolder, ...] = ()
    waiters: tuple[WhyWaiter, ...] = ()
    chain: tuple[WhyLink, ...] | None = ()
    roots: tuple[WhyRoot, ...] | None = ()
    holders_total: int = 0
    waiters_total: int = 0
    cut: bool = False


def hidden(report: WhyReport, may_read: Callable[[str], bool]) -> WhyReport:
    """``report`` as a reader who may read the nodes ``may_read`` says sees it (the
    report's own node is one: whoever asks about a name may read its node).

    What lies in another node is shown as hidden, never leaked: a wait there has node
    and name "" (a name is never empty: "" says hidden); a link or root there, node,
    name and the names it waits on "", session 0, no description, identity or
    address. How many there are, and how long a hidden root has held, stay.
    """
    seen: dict[str, bool] = {report.node: True}

    def readable(node: str) -> bool:
        known = seen.get(node)
        if known is None:
            known = seen[node] = may_read(node)
        return known

    def wait(w: WhyWait) -> WhyWait:
        return w if readable(w.node) else WhyWait("", "", w.position)

    def link(k: WhyLink) -> WhyLink:
        elsewhere = tuple(wait(w) for w in k.waits_elsewhere)
        if readable(k.node):
            return replace(k, waits_elsewhere=elsewhere)
        return WhyLink("", "", 0, tuple("" for _ in k.waits_on), elsewhere)

    def root(r: WhyRoot) -> WhyRoot:
        return r if readable(r.node) else WhyRoot("", "", 0, "", NO_IDENTITY, "", r.held_for)

    holders = tuple(
        h
        if h.waiting_for is None
        else replace(h, waiting_for=tuple(wait(w) for w in h.waiting_for))
        for h in report.holders
    )
    return replace(
        report,
        holders=holders,
        chain=None if report.chain is None else tuple(link(k) for k in report.chain),
        roots=None if report.roots is None else tuple(root(r) for r in report.roots),
    )
