"""The core and the abilities: ten members, and each ability where (and only where) its
capability is declared.

Every built-in backend's sessions are of ``session_class(capabilities)``: for each
set of capabilities a backend can declare (a tenure server's depend on its protocol
version, PostgreSQL's and Redis's on the server), the session implements exactly the
abilities of that set. The third party's ``dict://`` (``tests/dict_backend``)
implements the core alone and declares no ability; what needs one is refused naming
its capability, and the rate limiter runs over the core.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tenure
from tenure.backends import (
    ABILITIES,
    BUILTIN,
    BackendSession,
    Capability,
    CoreSession,
    NameStatistics,
    WaitChains,
    abilities_of,
    memory,
    postgres,
    redis,
    remote,
)
from tenure.backends import etcd as etcd_backend
from tenure.backends._abilities import ABILITY_MEMBERS
from tenure.backends._session import StoreSession
from tenure.backends._session_class import session_class
from tenure.errors import UnsupportedError
from tests.parsed import syntax_tree

SRC = Path(tenure.__file__).resolve().parent


def _members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")}


def test_the_core_has_ten_members() -> None:
    assert sorted(_members(CoreSession)) == [
        "acquire",
        "close",
        "deadline_passed",
        "describe_semaphore",
        "recovery_window",
        "release",
        "restate",
        "session_id",
        "watch_semaphore",
        "write_semaphore",
    ]


def _as_the_full_set(session: StoreSession) -> BackendSession:
    # Never called: mypy --strict (part of the test command) checks the return, so the
    # built-in backends' session class type-checks as the full set, the core and every
    # ability composed (assigning a dict:// session here fails to type-check).
    return session


def test_the_full_set_is_the_core_and_every_ability_composed() -> None:
    full = {name for cls in BackendSession.__mro__ for name in vars(cls) if name[0] != "_"}
    abilities = {member for members in ABILITY_MEMBERS.values() for member in members}
    assert full - {"register"} == _members(CoreSession) | abilities
    # Only what the composition cannot give is restated: the all-or-none acquire, which
    # takes the asking task's number on a backend with that ability too.
    assert _members(BackendSession) == {"acquire_all"}


def test_each_ability_adds_the_members_it_is_known_by() -> None:
    assert set(ABILITIES) == set(ABILITY_MEMBERS)
    for capability, protocol in ABILITIES.items():
        added = _members(protocol) - _members(CoreSession)
        assert added == set(ABILITY_MEMBERS[capability]), capability


def _declarable() -> dict[str, list[frozenset[Capability]]]:
    """Each built-in backend's capability sets, as it can declare them."""
    pg_optional = [
        frozenset(),
        frozenset({Capability.WATCH, Capability.PREFIX_WATCH}),
        frozenset({Capability.DURABLE, Capability.REPLICATED}),
    ]
    tenure_sets = [remote.CAPABILITIES]
    for version in sorted(remote.SINCE_VERSION):
        tenure_sets.append(tenure_sets[-1] | remote.SINCE_VERSION[version])
    tenure_sets.append(tenure_sets[-1] | {Capability.DEADLOCK_DETECTION})
    return {
        "memory": [memory.CAPABILITIES],
        "tenure": tenure_sets,
        "etcd": [etcd_backend.CAPABILITIES],
        "redis": [redis.CAPABILITIES, redis.CAPABILITIES - {Capability.DEADLOCK_DETECTION}],
        "postgres": [postgres.ALWAYS | extra for extra in pg_optional],
    }


@pytest.mark.parametrize("scheme", sorted(_declarable()))
def test_a_built_in_session_implements_exactly_the_abilities_its_backend_declares(
    scheme: str,
) -> None:
    for declared in _declarable()[scheme]:
        session = object.__new__(session_class(declared))  # (its class is what counts)
        assert abilities_of(session) == declared & ABILITIES.keys(), (scheme, declared)


def test_a_backend_declares_wait_chains_and_name_stats_exactly_when_it_answers() -> None:
    # The capabilities of the backend itself, not of its sessions (WaitChains,
    # NameStatistics).
    backends: dict[str, type] = {
        "memory": memory.MemoryBackend,
        "tenure": remote.TenureBackend,
        "etcd": etcd_backend.EtcdBackend,
        "redis": redis.RedisBackend,
        "postgres": postgres.PgBackend,
    }
    for scheme, sets in _declarable().items():
        answers = issubclass(backends[scheme], WaitChains)  # (a protocol of methods only)
        assert answers == any(Capability.WAIT_CHAINS in declared for declared in sets), scheme
        keeps = issubclass(backends[scheme], NameStatistics)  # (NAME_STATS: the same rule)
        assert keeps == any(Capability.NAME_STATS in declared for declared in sets), scheme


async def test_a_memory_session_has_the_abilities_memory_declares() -> None:
    async with tenure.connect("memory://") as client:
        await client.create_node("n")
        session = await client.session("n")
        backend_session = session._backend_session()
        assert abilities_of(backend_session) == client.capabilities & ABILITIES.keys()
        assert abilities_of(backend_session) == set(ABILITIES)  # memory:// has them all


def test_every_built_in_backend_makes_its_sessions_of_session_class() -> None:
    # A StoreSession made directly would have every ability, declared or not.
    direct = []
    for path in (SRC / "backends").rglob("*.py"):
        if path.name in ("_session.py", "_session_class.py"):
            continue
        for node in ast.walk(syntax_tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "StoreSession":
                direct.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert direct == []
    assert session_class(frozenset(ABILITIES)) is StoreSession


async def test_the_dict_backend_is_a_third_partys_and_implements_the_core_alone() -> None:
    assert "dict" not in BUILTIN  # reached through its entry point
    async with tenure.connect("dict://") as client:
        assert client.capabilities.isdisjoint(ABILITIES)
        await client.create_node("n")
        session = await client.session("n")
        assert abilities_of(session._backend_session()) == frozenset()
        async with session.mutex("m") as lock:  # the core alone locks
            assert lock.token > 0
        with pytest.raises(UnsupportedError, match="the capability all_or_none"):
            await session.lock_all(["a", "b"])
        with pytest.raises(UnsupportedError, match="the capability session_recovery"):
            session.ticket()
        with pytest.raises(UnsupportedError, match="the capability claims"):
            await session.claim("slot", 1.0, 2.0)
        with pytest.raises(UnsupportedError, match="PREFIX_WATCH"):
            client.cache("n", prefix="config/")
        # Built over the core where the ability is missing: the rate limiter.
        limiter = session.rate_limiter("api", rate=1.0, burst=2)
        assert [await limiter.try_acquire() for _ in range(3)] == [True, True, False]
