"""A request whose data cannot fit a frame, told as the data limit's error.

A ``tenure://`` client encodes each request into a frame of at most the server's
``max_frame_size`` (1 MiB unless ``--max-frame-size``) before sending it; data
larger than that never reaches the engine, whose check names the node's
``max_data_size`` (64 KiB unless the node says otherwise). Without this module the
caller met the transport's :class:`~tenure._protocol.FrameTooLargeError`, which says
nothing of the data or of its limit. :func:`data_refusal` asks the node's settings
(one DescribeNode, on this failure path only) and gives the engine's own error when
the data is over ``max_data_size``, or one naming both limits when the data is
within the node's limit but its frame is not within the server's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

from tenure._core import (
    Acquire,
    AcquireAll,
    ClaimName,
    Command,
    CreateSemaphore,
    NodeDescription,
    SwapSemaphoreData,
    UpdateSemaphore,
)
from tenure._protocol import FrameTooLargeError
from tenure.errors import LimitExceededError

__all__ = ["data_refusal"]

#: What each command's ``data`` is, in the engine's words (its ``check_data`` calls).
_WHAT: Final[dict[type[Command[Any]], str]] = {
    CreateSemaphore: "semaphore data",
    UpdateSemaphore: "semaphore data",
    SwapSemaphoreData: "semaphore data",
    Acquire: "owner data",
    AcquireAll: "owner data",
    ClaimName: "claim data",
}


def _largest_data(command: Command[Any]) -> tuple[str, int] | None:
    """What ``command``'s largest data field is called and its size, or None if it
    carries no data."""
    what = _WHAT.get(type(command))
    if what is None:
        return None
    sizes = [len(getattr(command, "data", b""))]
    if isinstance(command, SwapSemaphoreData):
        sizes.append(len(command.expected))
    return what, max(sizes)


async def data_refusal(
    command: Command[Any],
    node: str,
    error: FrameTooLargeError,
    describe: Callable[[str], Awaitable[NodeDescription]],
) -> LimitExceededError:
    """The error to raise for ``command`` of a session of ``node``, refused by the
    frame limit with ``error``: the data limit's, if the data is what is too large.

    ``describe`` asks the server for the node's settings; if that fails, ``error``
    itself is the answer (with what is known of the data).
    """
    found = _largest_data(command)
    if found is None:
        return error
    what, size = found
    try:
        limit = (await describe(node)).config.max_data_size
    except Exception:  # the node gone, the connection lost: the frame's reason stands
        return LimitExceededError(f"{what} is {size} bytes: {error}")
    if size > limit:
        # The engine's own words (tenure._core.checks.check_data), as memory:// says.
        return LimitExceededError(f"{what} is {size} bytes; max_data_size is {limit}")
    return LimitExceededError(
        f"{what} is {size} bytes, within node {node!r}'s max_data_size ({limit}), but "
        f"the request is larger than the server's frames ({error}; the server's "
        "--max-frame-size)"
    )
