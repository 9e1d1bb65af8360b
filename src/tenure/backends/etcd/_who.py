"""Who owners and waiters are: their sessions' descriptions and identities, read.

A semaphore's keys name sessions by lease id only; their records
(``n/<node>/sess/<sid>``) keep the description and the client's identity. A
description of the semaphore reads the records of the sessions it names, in Txns of
at most :data:`GETS_PER_TXN` reads (etcd's ``--max-txn-ops`` is 128 by default).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

from tenure._core.values import NO_IDENTITY, ClientIdentity, SemaphoreDescription
from tenure._etcd.requests import get
from tenure.backends.etcd._keys import decode
from tenure.backends.etcd._record import identity_of

if TYPE_CHECKING:
    from tenure._etcd.client import EtcdClient
    from tenure.backends.etcd._keys import Layout

__all__ = ["GETS_PER_TXN", "identified", "read_records"]

#: Reads in one Txn (below etcd's default --max-txn-ops of 128).
GETS_PER_TXN: Final = 64


async def read_records(
    conn: EtcdClient, layout: Layout, node: str, sids: Iterable[int]
) -> dict[int, dict[str, Any]]:
    """The records of sessions ``sids`` that exist, decoded, by lease id."""
    wanted = sorted(set(sids))
    found: dict[int, dict[str, Any]] = {}
    for start in range(0, len(wanted), GETS_PER_TXN):
        chunk = wanted[start : start + GETS_PER_TXN]
        reply = await conn.txn([], [get(layout.session(node, sid)) for sid in chunk])
        for sid, response in zip(chunk, reply.responses, strict=True):
            kvs = response.response_range.kvs
            if kvs:
                try:
                    found[sid] = decode(kvs[0].value)
                except ValueError:
                    continue  # not tenure's: shown without a description
    return found


async def identified(
    conn: EtcdClient, layout: Layout, node: str, description: SemaphoreDescription
) -> SemaphoreDescription:
    """``description`` with its owners' and waiters' descriptions and identities."""
    sids = [o.session_id for o in description.owners] + [w.session_id for w in description.waiters]
    if not sids:
        return description
    records = await read_records(conn, layout, node, sids)
    who: dict[int, tuple[str, ClientIdentity]] = {}
    for sid, value in records.items():
        text, identity, _ = identity_of(value)
        who[sid] = (text, identity)
    default = ("", NO_IDENTITY)
    return dataclasses.replace(
        description,
        owners=tuple(
            dataclasses.replace(o, description=found[0], identity=found[1])
            for o in description.owners
            for found in (who.get(o.session_id, default),)
        ),
        waiters=tuple(
            dataclasses.replace(w, description=found[0], identity=found[1])
            for w in description.waiters
            for found in (who.get(w.session_id, default),)
        ),
    )
