"""etcd's requests, built (``tenure/_etcd/requests.py``): ``prefix_end``, and each
``add_*`` builder making in place the message its twin makes whole."""

from __future__ import annotations

import pytest
from aetcd.rpc import rpc_pb2

from tenure._etcd.requests import (
    CREATE,
    EQUAL,
    LESS,
    add_compare_create,
    add_compare_created_before,
    add_compare_mod,
    add_compare_range,
    add_delete,
    add_get,
    add_get_prefix,
    add_put,
    compare_create,
    compare_mod,
    delete,
    get,
    get_prefix,
    prefix_end,
    put,
)


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        (b"/tenure/", b"/tenure0"),
        (b"a\xff", b"b"),
        (b"a\xff\xff", b"b"),
        (b"\xff\xff", b"\0"),
        (b"", b"\0"),
    ],
)
def test_prefix_end_is_the_first_key_after_every_key_under_the_prefix(
    prefix: bytes, end: bytes
) -> None:
    assert prefix_end(prefix) == end


def test_the_in_place_builders_make_what_their_twins_make() -> None:
    key, prefix = b"/p/k", b"/p/"
    whole = rpc_pb2.TxnRequest(
        compare=[compare_create(key, 0), compare_mod(key, 7)],
        success=[put(key, b"v", lease=3), delete(key), get(key), get_prefix(prefix)],
    )
    in_place = rpc_pb2.TxnRequest()
    add_compare_create(in_place.compare, key, 0)
    add_compare_mod(in_place.compare, key, 7)
    add_put(in_place.success, key, b"v", lease=3)
    add_delete(in_place.success, key)
    add_get(in_place.success, key)
    add_get_prefix(in_place.success, prefix)
    assert in_place == whole


def test_the_range_compares_cover_the_prefix_or_the_range_given() -> None:
    compares = rpc_pb2.TxnRequest().compare
    add_compare_created_before(compares, b"/p/", 9)
    add_compare_range(compares, b"/p/a", b"/p/b", EQUAL, 0)
    before, ranged = compares
    assert (before.key, before.range_end, before.target, before.result) == (
        b"/p/",
        b"/p0",
        CREATE,
        LESS,
    )
    assert before.create_revision == 9
    assert (ranged.key, ranged.range_end, ranged.result, ranged.create_revision) == (
        b"/p/a",
        b"/p/b",
        EQUAL,
        0,
    )
