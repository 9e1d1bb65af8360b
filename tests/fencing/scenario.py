"""The story every guard is tested with: a paused holder writes late, after a newer one.

Holder A takes the mutex on ``memory://`` (a :class:`~tenure.testing.FakeClock`, so
no test sleeps) and writes through the guard. Then A "pauses": its connection
drops (:func:`tenure.testing.disconnect`) and the clock passes its recovery window,
so its session expires while A knows nothing. Holder B takes the mutex, with a
greater token, and writes. A wakes and writes with its old token: the guard must
refuse, and the resource must keep B's write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest

import tenure
from tenure.errors import FencedError, SessionExpiredError
from tenure.testing import FakeClock, disconnect, reconnect

__all__ = ["Outcome", "paused_holder_writes_late"]

#: A guarded write: (token, what to write) -> done, or FencedError.
Write = Callable[[int, bytes], Awaitable[None]]

RECOVERY_WINDOW = 5.0


@dataclass(frozen=True)
class Outcome:
    """What happened: the two tokens and the late write's refusal."""

    token_a: int
    token_b: int
    refusal: FencedError


async def paused_holder_writes_late(write: Write) -> Outcome:
    """Play the story with ``write`` as the guarded write; A's late write must be refused."""
    clock = FakeClock()
    async with tenure.connect("memory://", clock=clock) as client:
        await client.create_node("fencing")
        session_a = await client.session("fencing", recovery_window=RECOVERY_WINDOW)
        lock_a = await session_a.mutex("resource").try_lock()
        assert lock_a is not None
        await write(lock_a.token, b"A: first write")

        disconnect(session_a, lose_pushes=True)  # A pauses: it hears nothing
        await clock.advance(RECOVERY_WINDOW + 1)  # ... for longer than its window

        async with client.session("fencing") as session_b:
            lock_b = await session_b.mutex("resource").try_lock()
            assert lock_b is not None
            assert lock_b.token > lock_a.token
            await write(lock_b.token, b"B: newer holder")
            assert lock_a.held, "A, paused, still believes it holds the lock"
            with pytest.raises(FencedError) as refused:
                await write(lock_a.token, b"A: late write after the pause")
            await write(lock_b.token, b"B: writes again with the same token")
        reconnect(session_a)  # A hears, at last, what happened while it slept
        assert isinstance(session_a.lost_reason, SessionExpiredError)
        assert isinstance(lock_a.lost_reason, SessionExpiredError)
    error = refused.value
    assert isinstance(error, FencedError)
    assert (error.token, error.highest) == (lock_a.token, lock_b.token)
    assert f"fencing token {lock_a.token} is older than {lock_b.token}" in str(error)
    return Outcome(lock_a.token, lock_b.token, error)
