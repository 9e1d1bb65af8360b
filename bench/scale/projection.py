"""The scale page's projection: each curve carried to a 16-core, 128 GB host, and to shards.

Straight lines through the measured rows, stated as such: a cost per item (memory,
CPU, time) taken at the largest size measured (where the fixed costs weigh least)
and multiplied out. One tenure server is one event loop, so one core: a bigger host
gives one server more memory but not more speed (a faster core would); its other
cores serve other shards (``tenure serve --shards N``, the sharded URL), which
multiply what is spread over nodes (holds, sessions, nodes, throughput) but not what
is one node's or one semaphore's (the watchers and the queue of one semaphore live on
one server), nor the connections, since a sharded client connects to every shard.
"""

from __future__ import annotations

import math
from typing import Any

Rows = dict[str, list[dict[str, Any]]]

#: The host projected to: cores, and the memory left to tenure's state.
CORES = 16
MEMORY = 100e9  # of 128 GB, leaving the rest to the system, page cache and headroom


def _largest(rows: Rows, dimension: str) -> dict[str, Any]:
    good = [r for r in rows.get(dimension, []) if "error" not in r and r.get("size", 0) > 0]
    return max(good, key=lambda r: r["size"], default={})


def _num(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    return float(value) if isinstance(value, int | float) else math.nan


def _n(value: float) -> str:
    if math.isnan(value):
        return "?"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def projection(rows: Rows) -> list[str]:
    """Bullet lines, one per dimension measured."""
    out: list[str] = []
    conn = _largest(rows, "connections")
    if conn:
        per = _num(conn, "bytes_per_item")
        alone = next((r for r in rows["connections"] if r.get("size") == 0), {})
        # The server's CPU beyond the probe's alone: the connections' keepalives.
        pings = _num(conn, "server_cpu_pct") - _num(alone, "server_cpu_pct")
        cpu_each = max(pings, 0.0) / 100 / conn["size"]  # of a core, per connection
        half_core = _n(0.5 / cpu_each) if cpu_each > 0 else "?"
        out.append(
            f"- **Connections**: {_n(per)} bytes and {cpu_each * 1e6:.2f} µs of CPU a second "
            f"each (pinging every 5 s) at {conn['size']:,}. Memory would allow "
            f"{_n(MEMORY / per)} on 128 GB; the keepalives of about "
            f"{half_core} would take half a core, so the "
            "CPU of the pings (and the open-files limit, 20,000 here: raise it) limits "
            "first. Shards do not help: a sharded client connects to every shard."
        )
    watch = _largest(rows, "watchers")
    if watch:
        per_ms = _num(watch, "last_told_ms") / watch["size"]
        out.append(
            f"- **Watchers of one semaphore**: {per_ms * 1e3:.2f} µs each to tell "
            f"(update to the last of {watch['size']:,} told). In 1 s one server tells "
            f"about {_n(1.0 / (per_ms / 1e3)) if per_ms > 0 else '?'}; a semaphore lives "
            "on one server, so neither more cores nor shards raise this: only a faster "
            "core. The time limits first, long before memory."
        )
    holds = _largest(rows, "holds")
    if holds:
        per = _num(holds, "bytes_per_item")
        restart_each = _num(holds, "restart_s") / holds["size"]
        fit = MEMORY / per
        in_5s = 5 / restart_each if restart_each > 0 else math.nan
        out.append(
            f"- **Holds**: {_n(per)} bytes each at {holds['size']:,}; 128 GB holds "
            f"{_n(fit)} on one server, whose restart would take about "
            f"{fit * restart_each:,.0f} s at {restart_each * 1e6:.1f} µs a hold: the "
            f"restart limits first (5 s at about {_n(in_5s)} holds a server). {CORES} "
            f"shards restart at once: {_n(CORES * in_5s)} holds within 5 s on the host."
        )
    waiters = _largest(rows, "waiters")
    if waiters:
        grant = _num(waiters, "grant_cpu_ms")
        out.append(
            f"- **Waiters**: a grant from the head of {waiters['size']:,} queued costs "
            f"{grant:.3f} ms of server CPU (about {_n(1e3 / grant) if grant else '?'} "
            "grants a second on one core). One semaphore's queue is one server's; memory "
            f"({_n(_num(waiters, 'bytes_per_item'))} bytes a waiter) limits its length "
            "long before time does."
        )
    sessions = _largest(rows, "sessions")
    if sessions:
        per = _num(sessions, "bytes_per_item")
        out.append(
            f"- **Sessions**: {_n(per)} bytes each at {sessions['size']:,}: "
            f"{_n(MEMORY / per)} on 128 GB, on one server or over {CORES} shards alike "
            "(memory is the host's); a node's own `max_sessions` (10,000 by default) is "
            "met first."
        )
    nodes = _largest(rows, "nodes")
    if nodes:
        listing = _num(nodes, "list_all_s") / nodes["size"]
        out.append(
            f"- **Nodes**: {_n(_num(nodes, 'bytes_per_item'))} bytes each at "
            f"{nodes['size']:,}; listing them all takes {listing * 1e6:.1f} µs a node "
            f"(a page of 1,000 at most {_num(nodes, 'list_page_max_ms'):.1f} ms), so "
            "memory and `--max-nodes` limit first; shards split both."
        )
    shards = {r["size"]: r for r in rows.get("shards", []) if "error" not in r}
    if 1 in shards and 2 in shards:
        one, two = shards[1]["pairs_per_s"], shards[2]["pairs_per_s"]
        per_pair = shards[1]["server_cpu_us_per_pair"]
        out.append(
            f"- **Shards**: par gave {one:,.0f} pairs/s on one server and {two:,.0f} on two "
            f"({two / one:.2f}x) here, where the 2 cores also run the client processes. "
            f"Each shard is one core's worth of server (CPU per pair "
            f"{per_pair:.0f} µs): with the clients elsewhere, {CORES} shards would serve "
            f"about {_n(CORES * 1e6 / per_pair)} pairs/s, if the work is spread over many nodes."
        )
    cells = {r["size"]: r for r in rows.get("cells", []) if "error" not in r}
    if 1 in cells and 2 in cells:
        one, two = cells[1]["pairs_per_s"], cells[2]["pairs_per_s"]
        alone, shared = cells[1]["cell_cpu_us_per_pair"], cells[2]["cell_cpu_us_per_pair"]
        out.append(
            f"- **Cells**: par gave {one:,.0f} pairs/s from one cell and {two:,.0f} from two "
            f"({two / one:.2f}x) here, where the 2 cores also run etcd and the client "
            f"processes. A cell's leader spent {alone:.0f} µs of CPU per pair alone and "
            f"{shared:.0f} µs beside another ({shared / alone:.2f}x): each cell is one "
            f"machine's worth of leader, so {CORES} cells on {CORES} machines would serve "
            f"about {_n(CORES * 1e6 / max(alone, shared))} pairs/s, etcd willing, if the "
            "work is spread over many nodes."
        )
    return out or ["- nothing measured yet."]
