"""Engine times shown as UNIX seconds: what a host does to a reply before it leaves. [compiled]

The engine keeps every time on its host's monotonic clock (it never reads a wall
clock: that would make it depend on something other than its inputs). Owners'
grant times, waiters' queue times and sessions' creation times are shown to people
as UNIX seconds, so the host converts them at its edge: it reads its wall clock and
its monotonic clock together and moves each engine time by the difference
(``shift``), which these pure functions do to the values that carry times.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tenure._core.commands import DescribeResult, SessionPage
from tenure._core.effects import Effect, WatchFired
from tenure._core.values import NodeDescription, SemaphoreDescription, SessionSummary


def stamp_description(description: SemaphoreDescription, shift: float) -> SemaphoreDescription:
    """``description`` with each owner's and waiter's ``since`` moved by ``shift``."""
    if not description.owners and not description.waiters:
        return description
    return dataclasses.replace(
        description,
        owners=tuple(_moved(o, shift) for o in description.owners),
        waiters=tuple(_moved(w, shift) for w in description.waiters),
    )


def stamp_sessions(page: SessionPage, shift: float) -> SessionPage:
    """Session summaries with ``created_at`` moved by ``shift``."""
    return SessionPage(tuple(_created(s, shift) for s in page.sessions))


def _created(summary: SessionSummary, shift: float) -> SessionSummary:
    created = summary.created_at
    return summary if created is None else dataclasses.replace(summary, created_at=created + shift)


def stamp_reply(reply: Any, shift: float) -> Any:
    """A reply as a host shows it: engine times moved by ``shift``."""
    if isinstance(reply, DescribeResult):
        return dataclasses.replace(reply, description=stamp_description(reply.description, shift))
    if isinstance(reply, SessionPage):
        return stamp_sessions(reply, shift)
    if isinstance(reply, NodeDescription) and reply.deadlocks:
        return dataclasses.replace(reply, deadlocks=tuple(_at(d, shift) for d in reply.deadlocks))
    return reply


def stamp_effect(effect: Effect, shift: float) -> Effect:
    """An effect as a host delivers it: a fired watch's description moved by ``shift``."""
    return stamp_effects([effect], shift)[0]


def stamp_effects(effects: list[Effect], shift: float) -> list[Effect]:
    """Effects as a host delivers them (see :func:`stamp_effect`).

    The watches a change fires share one description per shape (the server then
    encodes it once for all their pushes): each is moved once, and stays shared.
    """
    moved: dict[int, SemaphoreDescription] = {}
    out: list[Effect] = []
    for effect in effects:
        if type(effect) is WatchFired and effect.description is not None:
            description = effect.description
            stamped = moved.get(id(description))
            if stamped is None:
                stamped = moved[id(description)] = stamp_description(description, shift)
            if stamped is not description:
                effect = dataclasses.replace(effect, description=stamped)
        out.append(effect)
    return out


def _at(info: Any, shift: float) -> Any:
    at = info.at
    return info if at is None else dataclasses.replace(info, at=at + shift)


def _moved(info: Any, shift: float) -> Any:
    since = info.since
    return info if since is None else dataclasses.replace(info, since=since + shift)
