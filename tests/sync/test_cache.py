"""The sync prefix cache: entered with ``with``, read from any thread, changes blocking."""

from __future__ import annotations

import pytest

import tenure.sync
from tenure.errors import InvalidArgumentError, LimitExceededError

from .conftest import NODE


def test_a_sync_cache_mirrors_the_prefix_and_tells_changes(
    client: tenure.sync.Client, session: tenure.sync.Session
) -> None:
    session.semaphore("config/db").create(1, b"v1")
    session.semaphore("elsewhere").create(1, b"x")
    with client.cache(NODE, prefix="config/") as cache:
        assert isinstance(cache, tenure.sync.Cache)
        assert (cache.node, cache.prefix, cache.max_size, cache.owners) == (
            NODE,
            "config/",
            10_000,
            True,
        )
        assert [(name, view.data) for name, view in cache.items()] == [("config/db", b"v1")]
        with cache.changes() as changes:
            session.semaphore("config/db").update(b"v2")
            change = next(changes)
            assert change.name == "config/db"
            assert change.view is not None
            assert change.view.data == b"v2"
            session.semaphore("config/db").delete()
            assert next(changes) == tenure.CacheChange("config/db", None)
        assert cache.get("config/db") is None
        assert cache.get("elsewhere") is None  # outside the prefix: not in the cache
        with pytest.raises(InvalidArgumentError, match="name must be a str"):
            cache.get(7)  # type: ignore[arg-type]
    session.semaphore("config/a").create(1)
    session.semaphore("config/b").create(1)
    with pytest.raises(LimitExceededError, match=r"max_size \(1\)"):
        client.cache(NODE, prefix="config/", max_size=1)
