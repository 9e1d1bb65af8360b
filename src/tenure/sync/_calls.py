"""Calls through the portal that open a held thing and wrap it on the portal's loop.

Wrappers of held things are built on the portal thread, inside the call that opens
them, so that they subscribe to the async object's end before anything else can
happen to it (:mod:`tenure.sync._objects`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

A = TypeVar("A")
T = TypeVar("T")


async def opened(open_: Callable[[], Awaitable[A]], wrap: Callable[[A], T]) -> T:
    """Open on the portal loop, and wrap there."""
    return wrap(await open_())


async def now(call: Callable[[], T]) -> T:
    """Run a plain call on the portal loop (where the async objects live)."""
    return call()


async def opened_or_none(
    open_: Callable[[], Awaitable[A | None]], wrap: Callable[[A], T]
) -> T | None:
    """Like :func:`opened`, for the ``try_`` forms that may get nothing."""
    value = await open_()
    return None if value is None else wrap(value)
