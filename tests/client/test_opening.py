"""A call that opens something, used as what it opens: the ``await`` forgotten (issue 57).

``client = tenure.connect(url)`` then ``client.create_node(...)`` raised only
``AttributeError: 'Opening' object has no attribute 'create_node'``. The error now
names the call and both right ways to use it; the sync face's objects, used in an
``async with``, say which face they are of.
"""

from __future__ import annotations

import copy

import pytest

import tenure
import tenure.sync
from tenure.client import Opening


async def test_a_forgotten_await_on_connect_says_to_await_it() -> None:
    opening = tenure.connect("memory://forgotten-await")
    with pytest.raises(AttributeError) as raised:
        opening.create_node("jobs")  # type: ignore[attr-defined]
    assert str(raised.value) == (
        "'Opening' object has no attribute 'create_node': tenure.connect(...) returns an "
        "Opening, not the client: await it (`client = await tenure.connect(...)`) or use "
        "it in `async with tenure.connect(...) as client:`"
    )
    assert raised.value.name == "create_node"
    opening.close()


async def test_each_opening_call_names_itself() -> None:
    async with tenure.connect("memory://forgotten-await-2") as client:
        await client.create_node("jobs")
        opening = client.session("jobs")
        said = r"client\.session\(\.\.\.\) returns an Opening, not the session"
        with pytest.raises(AttributeError, match=said):
            opening.mutex("job")  # type: ignore[attr-defined]
        async with opening as session:
            locking = session.mutex("job").lock()
            with pytest.raises(AttributeError, match=r"`lock = await mutex\.lock\(\.\.\.\)`"):
                _ = locking.token  # type: ignore[attr-defined]
            leasing = session.semaphore("pool").acquire()
            with pytest.raises(AttributeError, match=r"`lease = await acquire\(\.\.\.\)`"):
                leasing.release()  # type: ignore[attr-defined]
            locks = session.lock_all(["a", "b"])
            with pytest.raises(AttributeError, match="not the locks"):
                _ = locks.tokens  # type: ignore[attr-defined]
            # Still what it was: awaited, it opens; probes see plain attributes.
            assert not hasattr(locking, "token")
            assert getattr(locking, "__wrapped__", None) is None
            lock = await locking
            assert lock.token > 0
            await lock.release()
            leasing.close()
            locks.close()


def test_an_opening_made_without_init_does_not_recurse() -> None:
    # (As copy and pickle make objects: its slots unset, read by __getattr__ itself.)
    blank = Opening.__new__(Opening)
    with pytest.raises(AttributeError):
        _ = blank.create_node  # type: ignore[attr-defined]
    opening = tenure.connect("memory://forgotten-await-3")
    with pytest.raises(AttributeError, match=r"tenure\.connect"):
        _ = copy.copy(opening).create_node  # type: ignore[attr-defined]
    opening.close()


async def test_the_sync_faces_objects_refuse_async_with_naming_the_face() -> None:
    client = tenure.sync.connect("memory://sync-in-async")
    try:
        with pytest.raises(TypeError) as raised:
            async with client:  # type: ignore[attr-defined]
                pass
        assert str(raised.value).startswith(
            "Client is tenure.sync's, blocking: use `with`, not `async with`; "
            "in asyncio code use tenure.connect(...)"
        )
    finally:
        client.close()
