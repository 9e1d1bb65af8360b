"""docs/benchmarks.md from the Measures of one run: tables, targets, plots, versions.

``python -m bench.tools.report [--out docs/benchmarks.md]`` renders it again from
the saved docs/benchmarks/results.json and meta.json (the targets as
:mod:`bench.peers.targets` has them now). A hand-written block between
``<!-- notes -->`` and ``<!-- /notes -->`` in the existing file is kept.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from bench.peers.targets import TARGETS, Target, Verdict, find, judge
from bench.tools.results import Measure, from_json

ORDER = (
    "tenure-always", "tenure-always (client each)", "tenure-off", "tenure-off (client each)",
    "tenure-memory", "redis", "redis (client each)", "tenure-redis", "tenure-etcd",
    "tenure-cluster", "tenure-cluster (client each)", "etcd", "etcd (client each)",
    "tenure-postgres", "postgres", "dflockd", "echo-uvloop", "echo-asyncio",
)  # fmt: skip
WORKLOADS = {
    "seq": "one client, acquire + release of a mutex on distinct keys, one pair at a time."
    " *client cpu*: the client process's CPU time (user + system, every thread) over the"
    " timed loop, per pair; *server cpu*: the server process's (PostgreSQL: with its"
    " backends; tenure-cluster: its three members and their etcd, added up), read with"
    " the scheduler's count (or psutil) by the client process around the same loop",
    "seq-awaited": "seq with every release awaited: on tenure `lock = await"
    " session.mutex(key).lock()`, then `await lock.release()`, which returns once the server"
    " has applied the release (two round trips a pair, where the block form sends the release"
    " ahead of the next acquire); redis-py's `lock.release()` waits for Redis's answer in"
    " both, so its row is seq again, measured beside them. Run on tenure-off, tenure-redis"
    " and redis only",
    "par": "32 concurrent clients (a session each), distinct keys, all at once; the rows"
    " *(client each)*: each of the 32 has its own client and connection, the others share one",
    "cont": "32 clients on one key, acquire -> release in a loop (*(client each)* as in par)."
    " *overtaken*: for each grant,"
    " how many grants of waits that began later came first (0 when FIFO); *overtaken share*:"
    " the fraction of grants overtaken at all. A wait begins in the client, before its"
    " request is sent: requests sent at nearly the same instant may reach the server in"
    " either order (etcd's gRPC client sends from threads of its own, and etcd serves each"
    " call in a goroutine), so a few overtakes can be arrival order rather than unfairness;"
    " Redis's hundreds are its polling Lock",
    "hold": "server memory per held lock (bench/peers/resources.py)",
    "sessions": "many idle sessions: server memory and keepalive CPU (bench/peers/resources.py)",
    "recovery": "restart of a server holding many leases, until it serves"
    " (bench/peers/resources.py)",
    "watch": "notification latency to many watchers (bench/peers/watch.py)",
    "ceiling": "raw echo server and client (asyncio Protocols), one round trip per request: "
    "one at a time (seq), and 32 connections at once (par). *seq server cpu*: the echo"
    " server's CPU time per round trip of seq (read around it as seq's), the floor a lone request's"
    " server CPU (seq-awaited's, per pair of two) is judged against",
}
#: (system, its server, its client): one session = one client of the lock service.
SETUP = (
    ("tenure-always", "`tenure serve --fsync always` (fsync before every reply)",
     '`tenure.connect("tenure://...")`, `async with session.mutex(key):` (entered and left'
     " by hand, to time each half; leaving does not wait for the release's answer: the"
     " next request follows it on the connection); par and cont: one client (one"
     " connection) for the 32 sessions"),
    ("tenure-off", "`tenure serve --fsync off`", "the same"),
    ("tenure-always (client each)", "the same as tenure-always",
     "par and cont: a `tenure.connect` (a connection) per session, each of the 32 workers"
     " its own client"),
    ("tenure-off (client each)", "the same as tenure-off", "the same"),
    ("tenure-memory", "none: `memory://` in the client process", "the same API"),
    ("redis", '`redis-server --save "" --appendonly no` (no persistence)',
     "redis-py `redis.asyncio.Redis(...).lock(key, timeout=30)` with the library's"
     " defaults (it polls every 0.1 s while the key is taken); one pool for all users"),
    ("redis (client each)", "the same as redis",
     "par and cont: a `redis.asyncio.Redis` (its own pool, so its own connection) per worker"),
    ("tenure-redis", "the same `redis-server` as the redis row (a fresh one, same command line)",
     '`tenure.connect("redis://...")`, `async with session.mutex(key):` (leaving does'
     " not wait for the release's answer: the calls share one pipelined connection):"
     " one script per operation, waiters woken by a push; one client for the 32 sessions"),
    ("tenure-etcd", "the same `etcd` as the etcd row (a fresh member, same command line)",
     '`tenure.connect("etcd://...")`, `async with session.mutex(key):` (leaving waits'
     " for the release's answer):"
     " tenure's API with client-side admission (Txns, one watch stream, one keepalive"
     " stream); one client (one gRPC channel) for the 32 sessions, a lease per session"),
    ("etcd", "`etcd`, one member, defaults (fsync on every commit)",
     "the v3 lock API (`/v3lockpb.Lock/Lock`, `/Unlock`) over one `grpc.aio` channel;"
     " a 60 s lease with keepalive per session, like Go's `concurrency.NewSession`"),
    ("etcd (client each)", "the same as etcd",
     "par and cont: a `grpc.aio` channel (a connection) per worker, its lease and keepalive"
     " on it"),
    ("tenure-cluster", "three `tenure serve --cluster etcd://.../bench` (each its own port"
     " and data directory; lease TTL 5 s, as shipped) over one `etcd` started as the etcd"
     " row's (a fresh member, same command line): the leader appends each turn's records"
     " as one fenced Txn and answers once etcd has it",
     '`tenure.connect("tenure://s1,s2,s3")` (every member a door; the client finds the'
     " leader), then as tenure-always; one client for the 32 sessions"),
    ("tenure-cluster (client each)", "the same as tenure-cluster",
     "par and cont: a `tenure.connect` (a connection to the leader) per worker"),
    ("tenure-postgres", "PostgreSQL 15, fsync and synchronous_commit on (a fresh cluster)",
     '`tenure.connect("postgres://...")`, `async with session.mutex(key):` (leaving waits'
     " for the release's answer):"
     " one PL/pgSQL function call per operation, wake-ups by LISTEN/NOTIFY"),
    ("postgres", "the same PostgreSQL as the tenure-postgres row (a fresh cluster)",
     "`SELECT pg_advisory_lock(hashtextextended(key, 0))` and `pg_advisory_unlock` through"
     " psycopg 3, one connection per session (what tooz's driver does): every worker has"
     " its own connection already, so no *(client each)* row"),
    ("dflockd", "`dflockd --max-locks 10000000` (its default, 1024 keys, refuses par)",
     "dflockd-client's async `acquire`/`release`, one connection per session (its"
     " protocol answers one request at a time per connection): every worker has its own"
     " connection already, so no *(client each)* row"),
)  # fmt: skip
SETUP_TEXT = """\
Like is compared with like: durable tenure (`--fsync always`) with etcd (both fsync
every change); non-durable tenure (`--fsync off`) with Redis without persistence and
dflockd (neither writes to disk); tenure on `etcd://` with etcd's own lock API, on
the same etcd; tenure's cluster (its log in etcd) with etcd's lock API on the same
etcd, and with durable single-server tenure; tenure on `redis://` with redis-py's
Lock on the same Redis; tenure on `postgres://` beside PostgreSQL's advisory locks
on the same PostgreSQL. par and cont run in two client shapes where a client can be
shared: one client (connection, pool, channel) for the 32 workers, and *(client
each)*, each worker its own. Every client process runs uvloop; each repeat is a
fresh client process, separate from the orchestrator and from the servers (one
server per system, reused across its repeats). Sessions are opened before the clock
starts. Every value is the median of the repeats; the first column of each table
also gives their range (min-max)."""
NOTES_DEFAULT = "_(the analysis of this run, written by hand: kept when the report is regenerated)_"
NOTES = re.compile(r"<!-- notes -->.*?<!-- /notes -->", re.DOTALL)


def fmt(value: float) -> str:
    """A number for a table: thousands separators for big ones, 3 digits for small.

    Near 1 (a fairness index of 0.9995) three digits would round to a bare "1".
    """
    if math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if value == int(value):
        return f"{value:.0f}"
    if 0.99 <= abs(value) < 1:
        return f"{value:.4f}"
    return f"{value:.3g}"


def targets_table(measures: list[Measure], targets: tuple[Target, ...]) -> list[str]:
    """The goals of one workload: tenure's value, the peer's, the ratio, met or missed."""
    rows = [
        "| target | why | tenure | peer | ratio / value | goal | |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for t in targets:
        v = judge(t, measures)
        unit = "x" if t.peer else ""
        goal = "-" if t.goal is None else f"{'<=' if t.at_most else '>='} {t.goal:,g}{unit}"
        shown = "-"
        if v.value is not None:
            shown = f"{v.value:.2f}x" if t.peer else fmt(v.value)
        theirs = _cell(v.peer) if (t.peer or t.context) else ""
        rows.append(
            f"| {t.label} | {t.reason} | {_cell(v.mine)} | {theirs} | {shown} | {goal}"
            f" | {_verdict(v)} |"
        )
    return rows


def _verdict(v: Verdict) -> str:
    """met, missed, reported (no goal) or not run; *(quick size)* when quick mode's."""
    if v.value is None:
        return "not run"
    verdict = "reported" if v.met is None else "**met**" if v.met else "**missed**"
    if v.mine is not None and "quick mode" in v.mine.note:
        verdict += " (quick size)"
    return verdict


def summary_table(measures: list[Measure]) -> list[str]:
    """Per workload of :data:`~bench.peers.targets.TARGETS`: how many met, missed, not run."""
    rows = [
        "| workload | met | missed | reported | not run |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for workload, targets in TARGETS.items():
        verdicts = [judge(t, measures) for t in targets]
        met = sum(1 for v in verdicts if v.met is True)
        missed = sum(1 for v in verdicts if v.met is False)
        not_run = sum(1 for v in verdicts if v.value is None)
        reported = len(verdicts) - met - missed - not_run
        rows.append(f"| {workload} | {met} | {missed} | {reported} | {not_run} |")
    return rows


def _cell(m: Measure | None) -> str:
    return "-" if m is None else f"{fmt(m.value)} ({m.system})"


def _label(metric: str, unit: str) -> str:
    """A column title: the metric without the unit it ends with, then the unit."""
    words = metric.split("_")
    if metric.endswith("_per_s") and len(words) > 2:
        words = words[:-2]
    elif len(words) > 1 and words[-1] in ("ms", "us", "s", "mb", "pct"):
        words = words[:-1]
    return f"{' '.join(words)} ({unit})" if unit else " ".join(words)


def workload_table(measures: list[Measure], workload: str) -> list[str]:
    """Systems as rows, the workload's metrics as columns (medians)."""
    mine = [m for m in measures if m.workload == workload]
    metrics = list(dict.fromkeys((m.metric, m.unit) for m in mine if m.metric != "error"))
    names = sorted(
        {m.system for m in mine}, key=lambda s: (ORDER.index(s) if s in ORDER else 99, s)
    )
    if not metrics:  # only failures (or a module that does not exist yet)
        return [f"- {m.system}: {m.note}" for m in mine]
    header = [_label(metric, unit) for metric, unit in metrics]
    rows = ["| system | " + " | ".join(header) + " |", "| --- |" + " ---: |" * len(metrics)]
    for name in names:
        cells = []
        for i, (metric, _unit) in enumerate(metrics):
            m = find(mine, workload, name, metric)
            text = "-" if m is None else fmt(m.value)
            if m is not None and i == 0 and len(m.samples) > 1:
                text += f" ({fmt(min(m.samples))}-{fmt(max(m.samples))})"
            cells.append(text)
        errors = [m.note for m in mine if m.system == name and m.metric == "error"]
        if errors:
            cells = cells or [""]
            cells[-1] += f" {'; '.join(dict.fromkeys(errors))}"
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    # Each note once, with the systems it is about (client: ... is the same for all).
    notes: dict[str, list[str]] = {}
    for name in names:
        for note in dict.fromkeys(m.note for m in mine if m.system == name and m.metric != "error"):
            if note and not note.startswith("client:"):
                notes.setdefault(note, []).append(name)
    if notes:
        rows.append("")
        rows += [f"- {', '.join(systems)}: {note}" for note, systems in notes.items()]
    return rows


def render(
    measures: list[Measure], meta: dict[str, Any], images: dict[str, Path], out: Path, notes: str
) -> str:
    """The whole markdown text."""
    link = {name: os.path.relpath(path, out.parent) for name, path in images.items()}
    sizes = meta.get("sizes", {})
    lines = [
        "# Benchmarks: tenure and its peers",
        "",
        f"Generated by `{meta.get('command', 'scripts/bench')}` on {meta.get('date', '?')}"
        f" ({meta.get('mode', '?')} mode, {meta.get('repeats', '?')} repeats,"
        f" {fmt(float(meta.get('duration_s', math.nan)))} s). Everything but the notes"
        " block is regenerated by each run; compare ratios from one run, never across runs.",
        "",
        "## How to run",
        "",
        "```sh",
        "scripts/bench --quick   # under 5 minutes: 3 repeats, half par/cont, each capped, 10k",
        "scripts/bench           # full: 5 repeats, full sizes",
        "scripts/bench --only seq,par --systems tenure-off,redis   # a subset",
        "```",
        "",
        "It installs what is missing (the `test,bench` extras, dflockd, `redis-server`,"
        " `etcd-server`), starts every server on 127.0.0.1, and writes this file, the plots"
        " and `benchmarks/results.json` (every sample). `python -m bench.tools.report` renders"
        " this file again from the saved results. See `bench/README.md`.",
        "",
        "## Machine and versions",
        "",
        "| | |",
        "| --- | --- |",
        *[f"| {k} | {v} |" for k, v in meta.get("versions", {}).items()],
        "",
        "## Setup",
        "",
        "| system | server | client |",
        "| --- | --- | --- |",
        *[f"| {system} | {server} | {client} |" for system, server, client in SETUP],
        "",
        SETUP_TEXT,
        "",
        f"Sizes: seq {sizes.get('seq', '?'):,} pairs (seq-awaited too),"
        f" par {sizes.get('par', '?'):,} pairs,"
        f" cont {sizes.get('cont', '?'):,} grants, {sizes.get('clients', 32)} clients for par"
        f" and cont, ceiling {sizes.get('ceiling', '?'):,} round trips.",
        "",
        "## Targets",
        "",
        *(
            [
                "A quick run: par and cont at half their full sizes, seq, par and cont each"
                f" stopped after {meta.get('quick_seconds') or '?'} s if not done by then,"
                " and the 100k workloads smaller"
                " (*quick size*). `scripts/bench --full` measures the full sizes.",
                "",
            ]
            if meta.get("mode") == "quick"
            else []
        ),
        "Each target is judged from this run alone, by the workload it is about"
        " (`bench/peers/targets.py` has them, each with the reason for its threshold)."
        " *(shared client)*: the 32 workers of par and cont share one client on both sides"
        " of the ratio; *(client each)*: each has its own on both sides. A bound's *peer*"
        " column shows the peer's value for context. *reported*: a comparison without a goal.",
        "",
        *summary_table(measures),
        "",
    ]
    for workload, targets in TARGETS.items():
        lines += [f"### Targets: {workload}", "", *targets_table(measures, targets), ""]
    for workload, about in WORKLOADS.items():
        if not any(m.workload == workload for m in measures):
            continue
        lines += [f"## {workload}", "", about[0].upper() + about[1:] + ".", ""]
        lines += workload_table(measures, workload)
        shown = [n for n in link if n == workload or n.startswith(f"{workload}-")]
        lines += [""] + [f"![{n}]({link[n]})" for n in shown] + ([""] if shown else [])
    lines += ["## Notes on the numbers", "", notes, ""]
    return "\n".join(lines)


def write(measures: list[Measure], meta: dict[str, Any], out: Path) -> None:
    """Draw the plots next to ``out`` (in ``out``'s stem directory) and write ``out``."""
    old = out.read_text() if out.exists() else ""
    found = NOTES.search(old)
    notes = found.group(0) if found else f"<!-- notes -->\n{NOTES_DEFAULT}\n<!-- /notes -->"
    # (Imported here: matplotlib is the bench extra's, and the tests of the tables,
    # run with the test extra alone, import this module without drawing.)
    from bench.tools import plots

    images = plots.draw(measures, out.parent / out.stem)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(measures, meta, images, out, notes))


def main() -> None:
    """Render the report again from the saved results."""
    parser = argparse.ArgumentParser(prog="python -m bench.tools.report", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks.md"))
    args = parser.parse_args()
    saved = args.out.parent / args.out.stem
    meta = json.loads((saved / "meta.json").read_text())
    write(from_json(saved / "results.json"), meta, args.out)


if __name__ == "__main__":
    main()
