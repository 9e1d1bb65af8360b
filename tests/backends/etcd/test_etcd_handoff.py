"""etcd:// hands no hold off: it does not declare HANDOFF, and refuses both calls
before anything is sent, saying why (docs/backends.md, etcd's capabilities)."""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import UnsupportedError


async def test_a_hand_off_is_refused_saying_why_and_the_lease_stays_held(etcd_url: str) -> None:
    async with tenure.connect(etcd_url) as client:
        assert tenure.Capability.HANDOFF not in client.capabilities
        await client.create_node("n")
        session = await client.session("n")
        lock = await session.mutex("job").lock()
        with pytest.raises(UnsupportedError, match=r"handoff.*create_revision"):
            await lock.handoff()
        with pytest.raises(UnsupportedError, match="the capability handoff"):
            await session.adopt("h1.anything")
        assert lock.held
        await lock.release()
    with pytest.raises(UnsupportedError, match="handoff"):
        await tenure.connect(etcd_url, require=[tenure.Capability.HANDOFF])
