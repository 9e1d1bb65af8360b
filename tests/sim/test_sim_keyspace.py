"""The simulated etcd's ranges against an oracle: every revision's whole state kept.

The store answers a range of now from its index of live keys, one of the past by
walking its versions (as far as the limit), and counts the past from now and the
changes since; the oracle replays the same writes into a copy of the whole state per
revision and answers every range by looking. They must agree on the keys, values,
revisions, ``count`` and ``more`` of any range, at any revision not compacted.
"""

from __future__ import annotations

from typing import Any

from aetcd.rpc import rpc_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from tenure._etcd.requests import delete, put
from tenure.testing.sim.etcd._store import SimEtcdStore

KEYS = [b"/k/" + bytes([letter]) for letter in b"abcdef"]
#: A write: the keys it puts (with a value) or deletes, in one revision.
Write = list[tuple[bytes, bytes | None]]

writes = st.lists(
    st.lists(
        st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=2))),
        min_size=1,
        max_size=3,
        unique_by=lambda change: change[0],  # etcd refuses a key twice in one txn
    ),
    min_size=1,
    max_size=30,
)
ranges = st.tuples(
    st.sampled_from([*KEYS, b"/k/", b"/"]),
    st.sampled_from([b"", b"\0", b"/k0", b"/k/c", b"/k/e", b"/a"]),
    st.integers(min_value=0, max_value=4),
)


class Oracle:
    """Every revision's state, whole: ``states[r]`` maps each live key to its value and
    mod revision."""

    def __init__(self) -> None:
        self.states: dict[int, dict[bytes, tuple[bytes, int]]] = {1: {}}
        self.revision = 1

    def write(self, changes: Write) -> None:
        state = dict(self.states[self.revision])
        changed = False
        for key, value in changes:
            if value is None:
                changed |= state.pop(key, None) is not None
            else:
                state[key] = (value, self.revision + 1)
                changed = True
        if changed:  # (a delete of nothing is no write: the revision stays)
            self.revision += 1
            self.states[self.revision] = state

    def range(self, key: bytes, end: bytes, revision: int, limit: int) -> Any:
        state = self.states[revision]
        found = sorted(
            (k, value, mod)
            for k, (value, mod) in state.items()
            if (k == key if not end else key <= k and (end == b"\0" or k < end))
        )
        shown = found[:limit] if limit else found
        return shown, len(found), len(found) > len(shown)


@settings(max_examples=300, deadline=None)
@given(writes, st.lists(ranges, min_size=1, max_size=8), st.data())
def test_every_range_at_every_revision_agrees_with_the_oracle(
    history: list[Write], asked: list[tuple[bytes, bytes, int]], data: st.DataObject
) -> None:
    store, oracle = SimEtcdStore(), Oracle()
    for changes in history:
        ops = [put(key, value) if value is not None else delete(key) for key, value in changes]
        store.txn(rpc_pb2.TxnRequest(success=ops))
        oracle.write(changes)
    assert store.keys.revision == oracle.revision
    compacted = data.draw(st.integers(min_value=0, max_value=oracle.revision), "compacted at")
    if compacted > 1:
        store.compact(rpc_pb2.CompactionRequest(revision=compacted))
    for key, end, limit in asked:
        revision = data.draw(st.integers(max(compacted, 1), oracle.revision), "read at")
        request = rpc_pb2.RangeRequest(key=key, range_end=end, revision=revision, limit=limit)
        reply = store.range(request)
        shown, count, more = oracle.range(key, end, revision, limit)
        assert [(kv.key, kv.value, kv.mod_revision) for kv in reply.kvs] == shown
        assert (reply.count, reply.more) == (count, more)
        counted = store.range(
            rpc_pb2.RangeRequest(key=key, range_end=end, revision=revision, count_only=True)
        )
        assert counted.count == count
