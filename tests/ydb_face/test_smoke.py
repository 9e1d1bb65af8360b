"""The YDB SDK's sync coordination client against a real server: the path every user takes."""

from __future__ import annotations

import ydb
from ydb.coordination import (
    ConsistencyMode,
    CoordinationClient,
    NodeConfig,
    RateLimiterCountersMode,
)

from tests.ydb_face.conftest import DATABASE, unique


def test_node_config_round_trip_and_a_held_semaphore(driver: ydb.Driver) -> None:
    client = CoordinationClient(driver)
    path = f"{DATABASE}/{unique()}"
    config = NodeConfig(
        attach_consistency_mode=ConsistencyMode.STRICT,
        rate_limiter_counters_mode=RateLimiterCountersMode.DETAILED,
        read_consistency_mode=ConsistencyMode.RELAXED,
        self_check_period_millis=1500,
        session_grace_period_millis=7000,
    )
    client.create_node(path, config)
    assert client.describe_node(path) == config
    with client.session(path) as session:
        semaphore = session.semaphore("job", 2)
        with semaphore:
            described = semaphore.describe()
            assert (described.limit, described.count, len(described.owners)) == (2, 1, 1)
            semaphore.update(b"hello")
            assert semaphore.describe().data == b"hello"
    client.delete_node(path)
