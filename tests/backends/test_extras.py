"""A backend whose libraries are an extra the client did not install is refused by name."""

from __future__ import annotations

import sys

import pytest

import tenure
from tenure.errors import UnsupportedError


@pytest.mark.parametrize("url", ["etcd://127.0.0.1:1", "etcds://127.0.0.1:1"])
async def test_etcd_without_its_extra_names_the_extra(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a client installed without tenure[etcd]: aetcd cannot be imported, and
    # the backend's modules and the etcd client's were never loaded.
    for name in ["aetcd", *(m for m in sys.modules if m.startswith("aetcd."))]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in [m for m in sys.modules if m.startswith(("tenure.backends.etcd", "tenure._etcd"))]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(UnsupportedError, match=r"pip install 'tenure\[etcd\]'") as raised:
        await tenure.connect(url)
    assert "aetcd" in str(raised.value)


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1", "rediss://127.0.0.1:1"])
async def test_redis_without_its_extra_names_the_extra(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a client installed without tenure[redis]: redis-py cannot be imported.
    for name in ["redis", *(m for m in sys.modules if m.startswith("redis."))]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in [m for m in sys.modules if m.startswith("tenure.backends.redis")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(UnsupportedError, match=r"pip install 'tenure\[redis\]'") as raised:
        await tenure.connect(url)
    assert "'redis'" in str(raised.value)


@pytest.mark.parametrize("url", ["postgres://h/db", "postgresql://h/db"])
async def test_postgres_without_its_extra_names_the_extra(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on a client installed without tenure[postgres]: psycopg cannot be imported.
    for name in ["psycopg", *(m for m in sys.modules if m.startswith("psycopg"))]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in [m for m in sys.modules if m.startswith("tenure.backends.postgres")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(UnsupportedError, match=r"pip install 'tenure\[postgres\]'") as raised:
        await tenure.connect(url)
    assert "psycopg" in str(raised.value)
