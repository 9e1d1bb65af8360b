"""``tenure://``: data too large for a frame gets the data limit's error, not the
transport's (issue 50).

A request is encoded into a frame of at most the server's ``max_frame_size`` (1 MiB
by default) before it is sent; data larger than that never reached the engine,
whose check names the node's ``max_data_size``, and the caller met
``FrameTooLargeError`` instead ("the frame body is 2097169 bytes; the peer accepts at
most 1048576"), which says nothing of the data. ``memory://`` is the reference: the
same call there gives the engine's words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

import tenure
from tenure._protocol import FrameTooLargeError
from tenure.errors import LimitExceededError
from tests.server.wire import ServerProcess

pytestmark = pytest.mark.timeout(60)

#: Over the server's default frame (1 MiB), and over a node's default max_data_size.
BIG = b"x" * (2 << 20)

Call = Callable[[tenure.Session], Awaitable[object]]

CALLS: dict[str, tuple[Call, str]] = {
    "create": (lambda s: s.semaphore("pool").create(limit=1, data=BIG), "semaphore data"),
    "update": (lambda s: s.semaphore("small").update(BIG), "semaphore data"),
    "acquire": (lambda s: s.semaphore("small").acquire(data=BIG, timeout=0), "owner data"),
    "mutex": (lambda s: s.mutex("job").lock(data=BIG), "owner data"),
    "lock_all": (lambda s: s.lock_all(["a", "b"], data=BIG), "owner data"),
    "claim": (lambda s: s.claim("slot", 1.0, 10.0, data=BIG), "claim data"),
}


async def refusal(url: str, call: Call) -> LimitExceededError:
    """The error ``call`` raises in a session of node ``n`` (default settings) at ``url``."""
    async with tenure.connect(url) as client:
        await client.create_node("n", exist_ok=True)
        async with client.session("n") as session:
            await session.semaphore("small").create(limit=1, exist_ok=True)
            with pytest.raises(LimitExceededError) as raised:
                await call(session)
            # The session goes on: nothing was sent.
            assert await session.semaphore("small").describe()
            return raised.value


@pytest.mark.parametrize("name", list(CALLS))
async def test_data_over_the_frame_gets_the_node_limits_error(
    tenure_server: ServerProcess, name: str
) -> None:
    call, what = CALLS[name]
    error = await refusal(f"tenure://127.0.0.1:{tenure_server.port}", call)
    assert not isinstance(error, FrameTooLargeError)
    assert str(error) == f"{what} is {len(BIG)} bytes; max_data_size is 65536"
    reference = await refusal("memory://", call)
    assert str(error) == str(reference)


async def test_data_within_the_node_limit_but_over_the_frame_names_both(
    tenure_server: ServerProcess,
) -> None:
    four_mib = 4 << 20
    async with tenure.connect(f"tenure://127.0.0.1:{tenure_server.port}") as client:
        await client.create_node("big", max_data_size=four_mib)
        async with client.session("big") as session:
            with pytest.raises(LimitExceededError) as raised:
                await session.semaphore("pool").create(limit=1, data=BIG)
            message = str(raised.value)
            assert not isinstance(raised.value, FrameTooLargeError)
            assert f"semaphore data is {len(BIG)} bytes" in message
            assert f"max_data_size ({four_mib})" in message
            assert "--max-frame-size" in message
            # Data that fits the frame is taken.
            await session.semaphore("pool").create(limit=1, data=b"x" * (512 << 10))
