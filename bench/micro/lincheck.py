"""How fast the linearizability checker (``tenure.testing.lincheck``) checks a history.

``python -m bench.micro.lincheck`` prints three tables; a history's time is the best
of ``--repeats`` (3) checks (one, when it passes ``--timeout``: 5 s):

* **generated**: for each model (register, counter, mutex, semaphore with a limit of
  3, membership, kv) and each concurrency (``--processes``: 2, 8, 16, 50),
  ``--histories`` (3) linearizable histories of ``--ops`` (2,000) operations on one
  key (their operations over the sum of their times), each made by running
  the model's sequential object: each process calls an operation, which takes
  effect at a random later step (its linearization point) and returns at another,
  the processes' steps interleaved at random, so an operation overlaps about as many
  others as there are processes. A share ``--info`` of them end ``info`` (3 %, and
  0 % to compare: a row each): half of those never took effect (a lost request),
  half did (a lost answer; a grant nobody heard of ends unobserved, as the mutex
  and semaphore models expect). Each history must check linearizable: the table says
  so if not; ``unknown`` is a check that passed ``--timeout`` (5 s).
* **porcupine**: porcupine's own test data, its 102 Jepsen etcd logs (``--format
  jepsen-log``, the register model) and its 6 kv histories (``porcupine-kv``, the kv
  model): operations, time, the verdicts, the slowest file. Read from
  ``tests/lincheck/data/porcupine/`` (vendored), else ``/tmp/porc/test_data/``
  (extracted from the porcupine mirror when missing).
* **violation**: what proving a violation costs: a register history of 500 or 2,000
  operations (8 processes, each write's value new) with one stale read planted, in
  its middle or near its end: a read made to return the first value written, which
  a write that completed before the read was called had replaced. The search must
  try every order before that point: the time, its steps, its cache.

Measured 2026-11-26 on the project's machine (2 cores, shared with other work: a
figure moves by up to 2x from run to run), pure Python (lincheck is not compiled),
the checker of 797eb31 (unknown twins taken in call order, an observed unknown
write bounded by its observer); about 2 min in all (most of it the checks that
passed the bound)::

    model        info         2         8        16        50   (ops/s by processes)
    register       3%   187,155    66,674     4,392   unknown
    register       0%   181,276    60,338     3,464   unknown
    counter        3%    11,179     1,278   unknown   unknown
    counter        0%   280,099   143,564    55,553   unknown
    mutex          3%   370,616 1,606,398 2,606,764 4,362,900
    mutex          0%   527,847 1,535,741 2,533,801 4,294,564
    semaphore      3%   194,718   166,788   331,702 1,278,371
    semaphore      0%   186,389   163,914   338,276 1,061,290
    membership     3%   271,458    90,130    35,363   unknown
    membership     0%   358,703   132,304    43,624   unknown
    kv             3%   136,709     6,028   unknown   unknown
    kv             0%   146,296     1,460   unknown   unknown

    porcupine's jepsen/*.log (102): 8,523 ops in 0.500 s, 17,044 ops/s (the slowest:
      etcd_002.log, 77 ops, 154 ms); kv/*.txt (6): 4,574 ops in 0.258 s, 17,716 ops/s
      (the slowest: c50-ok.txt, 1,712 ops, 246 ms); 23 + 3 linearizable, 79 + 3 not,
      the counts porcupine's tests expect

       ops info where              verdict        ms       steps      cache
       500   3% middle    not linearizable      75.3     251,309     39,136
       500   3% end       not linearizable    1505.0   3,784,941    508,192
       500   0% middle    not linearizable      10.3      30,942      6,525
       500   0% end       not linearizable      17.8      57,931     12,242
      2000   3% middle             unknown    5212.5   8,484,864  1,108,352
      2000   3% end                unknown    5214.7   8,419,328  1,063,416
      2000   0% middle    not linearizable      50.0     117,087     24,798
      2000   0% end       not linearizable     113.4     240,556     50,690

Before those two reductions (the checker of 9c1331d, the same run otherwise): every
counter row with 3% info passed the bound, and porcupine's Jepsen logs took 1.52 s
(etcd_002.log 596 ms).

What it says: the search is fast while few operations overlap (tens to hundreds of
thousands a second up to 8 processes; kv, whose appends every later read sees, a
few thousand at 8) and falls off a cliff with concurrency (16: thousands to tens of
thousands, kv past the bound; 50: past it on 2,000 operations), as Wing and Gong's
search does: each overlapping operation multiplies the orders to try. The mutex and
semaphore rise instead: the more processes, the more try-acquires fail, and a failed
one is inert, left out of the search (9c1331d; the checker of 66cf0e7 searched them:
the mutex at 50 processes checked 36,721 ops/s without info and passed the bound
with 3 %, the semaphore about 5,000 at 16 and passed it at 50). ``info`` operations
stay open to the end, so they overlap everything after them: a counter's open adds
of one delta are now taken as a count (twins, in call order), yet at 16 processes
the adds of different deltas and the totals they must explain still pass the bound;
and proving a violation, which must rule out every order, goes from milliseconds
without them to seconds or past the bound with 3 % of them (66cf0e7: 938 ms and past
the bound for 500 operations; leaving the inert ones out took those to 88 ms and
1.7 s).

Internals: none; the public ``tenure.testing.lincheck`` (``from_events``, ``check``,
``read_history``) and the ``steps`` and ``cache_entries`` of its ``KeyResult``.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tenure.testing import lincheck

ROOT = Path(__file__).resolve().parents[2]
#: Where porcupine's test data is read from, in order (the first that exists).
PORCUPINE = (ROOT / "tests/lincheck/data/porcupine", Path("/tmp/porc/test_data"))
MIRROR = Path("/work/.mirror/anishathalye+porcupine/repo")


class SequentialObject:
    """A model's object run one operation at a time: what a process calls next
    (``choose``), what that call does when it takes effect (``apply``)."""

    @property
    def header(self) -> dict[str, Any]:
        """The history's header (a semaphore's limit)."""
        return {}

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        """The next operation of ``process``: its ``f`` and input."""
        raise NotImplementedError

    def apply(self, process: int, f: str, value: Any) -> tuple[str, Any]:
        """Take effect now: the outcome (``ok``/``fail``) and the output."""
        raise NotImplementedError

    def may_vanish(self, f: str) -> bool:
        """Whether an ``info`` call of ``f`` may be one that never took effect (a lost
        request); otherwise it took effect and its answer was lost."""
        return True

    def answered(self, process: int, f: str, result: tuple[str, Any], heard: bool) -> None:
        """``process``'s call of ``f`` returned ``result``, which it ``heard`` (or not:
        the answer was lost)."""


class Register(SequentialObject):
    """read, write, cas; values from 0 to 4, or each write's value new (``fresh``)."""

    def __init__(self, fresh: bool = False) -> None:
        self.value: Any = None
        self.fresh = fresh
        self.written = 0

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        """Half reads, a quarter writes, a quarter cas."""
        f = rng.choice(("read", "read", "write", "cas"))
        if f == "read":
            return f, None
        self.written += 1
        new = self.written if self.fresh else rng.randrange(5)
        if f == "write":
            return f, new
        old = self.value if rng.random() < 0.5 else rng.randrange(5)
        return f, [old, new]

    def apply(self, process: int, f: str, value: Any) -> tuple[str, Any]:
        """As a register does."""
        if f == "read":
            return "ok", self.value
        if f == "write":
            self.value = value
            return "ok", None
        if self.value != value[0]:
            return "fail", None
        self.value = value[1]
        return "ok", None


class Counter(SequentialObject):
    """add (ok: the new total), read, cas."""

    def __init__(self) -> None:
        self.total = 0

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        """Adds mostly; some reads and cas."""
        f = rng.choice(("add", "add", "read", "cas"))
        if f == "add":
            return f, rng.randrange(1, 4)
        if f == "read":
            return f, None
        return f, [self.total if rng.random() < 0.5 else rng.randrange(10), rng.randrange(10)]

    def apply(self, process: int, f: str, value: Any) -> tuple[str, Any]:
        """As a counter does."""
        if f == "add":
            self.total += value
            return "ok", self.total
        if f == "read":
            return "ok", self.total
        if self.total != value[0]:
            return "fail", None
        self.total = value[1]
        return "ok", None


class Semaphore(SequentialObject):
    """Try-acquires of one token (ok: the fencing token; fail: all taken), and the
    holder's release; a mutex with ``limit`` 1."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held: set[int] = set()
        self.token = 0
        self.holding: dict[int, int] = {}  # process -> the token it was told

    @property
    def header(self) -> dict[str, Any]:
        """The limit."""
        return {"limit": self.limit}

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        """A holder releases; another process tries to acquire."""
        token = self.holding.pop(process, None)
        return ("acquire", None) if token is None else ("release", token)

    def apply(self, process: int, f: str, value: Any) -> tuple[str, Any]:
        """Grant a token if one is free; end a hold."""
        if f == "release":
            self.held.discard(value)
            return "ok", None
        if len(self.held) >= self.limit:
            return "fail", None
        self.token += 1
        self.held.add(self.token)
        return "ok", self.token

    def answered(self, process: int, f: str, result: tuple[str, Any], heard: bool) -> None:
        """The process holds what it was told it was granted; a grant nobody heard of
        ends unobserved (its lease expires: the model leaves such an acquire out)."""
        if f == "acquire" and result[0] == "ok":
            if heard:
                self.holding[process] = result[1]
            else:
                self.held.discard(result[1])

    def may_vanish(self, f: str) -> bool:
        """An acquire may have been lost (then it granted nothing); a release took
        effect (else its token would be held for ever, and the history stall)."""
        return f == "acquire"


class Membership(SequentialObject):
    """join and leave of ids 0 to 9 (fail: already in, or not in), members."""

    def __init__(self) -> None:
        self.members: set[int] = set()

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        """A read of the members in three, else a join or a leave of a random id."""
        f = rng.choice(("members", "join", "leave"))
        return f, None if f == "members" else rng.randrange(10)

    def apply(self, process: int, f: str, value: Any) -> tuple[str, Any]:
        """As a group does."""
        if f == "members":
            return "ok", sorted(self.members)
        if (value in self.members) == (f == "join"):
            return "fail", None
        (self.members.add if f == "join" else self.members.discard)(value)
        return "ok", None


class KeyValue(SequentialObject):
    """porcupine's get, put, append of short strings."""

    def __init__(self) -> None:
        self.text = ""
        self.made = 0

    def choose(self, rng: random.Random, process: int) -> tuple[str, Any]:
        """Gets, appends and a few puts."""
        f = rng.choice(("get", "get", "append", "append", "put"))
        self.made += 1
        return f, None if f == "get" else f"x {process} {self.made} y"

    def apply(self, process: int, f: str, value: Any) -> tuple[str, Any]:
        """As porcupine's kv does."""
        if f == "get":
            return "ok", self.text
        self.text = value if f == "put" else self.text + value
        return "ok", None


#: Each model's object, made anew for each history.
OBJECTS: dict[str, Callable[[], SequentialObject]] = {
    "register": Register,
    "counter": Counter,
    "mutex": lambda: Semaphore(1),
    "semaphore": lambda: Semaphore(3),
    "membership": Membership,
    "kv": KeyValue,
}


@dataclass
class _Call:
    f: str
    value: Any
    result: tuple[str, Any] | None = None
    lost: bool = False


def generate(
    thing: SequentialObject, processes: int, ops: int, info: float, seed: int
) -> list[dict[str, Any]]:
    """The events of a linearizable history of ``ops`` operations (module docstring):
    a random process takes a step at each instant: it calls an operation, or its call
    takes effect, or returns."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = [dict(thing.header)] if thing.header else []
    flying: dict[int, _Call] = {}
    called = returned = instant = 0
    while returned < ops:
        process = rng.randrange(processes)
        call = flying.get(process)
        instant += 1
        event: dict[str, Any] = {"process": process, "time": instant}
        if call is None:
            if called == ops:
                continue
            f, value = thing.choose(rng, process)
            flying[process] = _Call(f, value)
            events.append({**event, "type": "invoke", "f": f, "value": value})
            called += 1
        elif call.result is None:  # its linearization point
            call.lost = rng.random() < info
            # half the lost calls never took effect (a lost request), half did (a lost answer)
            if call.lost and thing.may_vanish(call.f) and rng.random() < 0.5:
                call.result = ("info", None)
            else:
                call.result = thing.apply(process, call.f, call.value)
        else:
            thing.answered(process, call.f, call.result, heard=not call.lost)
            outcome, output = ("info", None) if call.lost else call.result
            events.append({**event, "type": outcome, "f": call.f, "value": output})
            del flying[process]
            returned += 1
    return events


def history_of(events: list[dict[str, Any]]) -> lincheck.History:
    """The events as a history (their positions are their lines)."""
    return lincheck.from_events(enumerate(events, start=1))


def check(
    history: lincheck.History, model: str, options: argparse.Namespace
) -> lincheck.CheckResult:
    """``history`` checked under ``model`` within the run's time bound."""
    return lincheck.check(history, model, timeout=options.timeout)


def best(
    run: Callable[[], lincheck.CheckResult], options: argparse.Namespace
) -> tuple[float, lincheck.CheckResult]:
    """The least time of ``--repeats`` runs (s), and the last run's result; one run
    when it passes the time bound (another would too, and only cost the bound again)."""
    times: list[float] = []
    for _ in range(options.repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
        if result.verdict == lincheck.UNKNOWN:
            break
    return min(times), result


def generated(options: argparse.Namespace) -> None:
    """The first table: ops/s by model, share of info operations and concurrency."""
    counts = options.processes
    print(
        f"generated linearizable histories of {options.ops} operations on one key, "
        f"{options.histories} per cell;"
    )
    print(f"operations checked per second (each history's best of {options.repeats}) by processes")
    print(f"(unknown: a history past the {options.timeout:g} s bound):")
    print(f"{'model':<12}{'info':>5}" + "".join(f"{n:>10}" for n in counts))
    for model, make in OBJECTS.items():
        for info in options.info:
            cells = [cell(model, make, n, info, options) for n in counts]
            print(f"{model:<12}{info:>5.0%}" + "".join(f"{text:>10}" for text in cells))


def cell(
    model: str,
    make: Callable[[], SequentialObject],
    processes: int,
    info: float,
    options: argparse.Namespace,
) -> str:
    """One cell of the first table: the operations of ``--histories`` histories over the
    sum of their checks' times (one history's shape moves the figure more than the
    machine's noise does); ``unknown`` as soon as one passes the bound."""
    ops, took = 0, 0.0
    for number in range(options.histories):
        seed = options.seed + 1000 * number + processes
        history = history_of(generate(make(), processes, options.ops, info, seed))
        seconds, result = best(partial(check, history, model, options), options)
        if result.verdict == lincheck.UNKNOWN:
            return "unknown"
        if not result.ok:  # (the generator would be wrong: say so)
            return "NOT LIN."
        ops += len(history.operations)
        took += seconds
    return f"{ops / took:,.0f}"


def porcupine_data() -> Path | None:
    """porcupine's ``test_data`` (module docstring), extracted if need be; None: none."""
    for path in PORCUPINE:
        if (path / "jepsen").is_dir():
            return path
    if not MIRROR.is_dir():
        return None
    target = PORCUPINE[-1].parent
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(MIRROR), "archive", "HEAD", "test_data"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return PORCUPINE[-1]


def porcupine(options: argparse.Namespace) -> None:
    """The second table: porcupine's Jepsen logs and kv histories."""
    data = porcupine_data()
    if data is None:
        print("\nporcupine's test data: not found (see the module docstring)")
        return
    print(f"\nporcupine's test data ({data}), best of {options.repeats}:")
    print(f"{'files':<24}{'ops':>8}{'seconds':>10}{'ops/s':>10}  verdicts; the slowest")
    sets = [
        ("jepsen/*.log", "jepsen-log", "register", sorted((data / "jepsen").glob("*.log"))),
        ("kv/*.txt", "porcupine-kv", "kv", sorted((data / "kv").glob("*.txt"))),
    ]
    for name, form, model, paths in sets:
        ops, total, slowest = 0, 0.0, (0.0, "")
        verdicts: dict[str, int] = {}
        for path in paths:
            history = lincheck.read_history(path, form)
            took, result = best(partial(check, history, model, options), options)
            ops += len(history.operations)
            total += took
            verdicts[result.verdict] = verdicts.get(result.verdict, 0) + 1
            slowest = max(slowest, (took, f"{path.name} ({len(history.operations)} ops)"))
        said = ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items()))
        label = f"{name} ({len(paths)})"
        print(
            f"{label:<24}{ops:>8}{total:>10.3f}{ops / total:>10,.0f}  "
            f"{said}; {slowest[1]} {slowest[0] * 1000:.0f} ms"
        )


def plant_stale_read(events: list[dict[str, Any]], at: float) -> int:
    """Make the first ok read at or after fraction ``at`` of the history, called after
    a second write completed, return the first value written; its event's index."""
    writes = [e for e in events if e.get("f") == "write" and e.get("type") == "ok"]
    first = next(e for e in events if e.get("f") == "write" and e.get("type") == "invoke")
    replaced = writes[1]["time"]  # the second write completed: the first is overwritten
    calls: dict[int, int] = {}
    for index, event in enumerate(events):
        if event.get("type") == "invoke":
            calls[event["process"]] = event["time"]
        elif (
            index >= at * len(events)
            and event.get("f") == "read"
            and event.get("type") == "ok"
            and calls[event["process"]] > replaced
        ):
            event["value"] = first["value"]
            return index
    raise ValueError("no read to plant a stale value in")


def violation(options: argparse.Namespace) -> None:
    """The third table: proving a planted stale read."""
    print(f"\na stale read planted in a register history, 8 processes, best of {options.repeats}")
    print(f"(unknown: past the {options.timeout:g} s bound):")
    print(f"{'ops':>6}{'info':>5} {'where':<8}{'verdict':>18}{'ms':>10}{'steps':>12}{'cache':>11}")
    for ops in (500, 2_000):
        for info in options.info:
            for where, at in (("middle", 0.5), ("end", 0.9)):
                events = generate(Register(fresh=True), 8, ops, info, options.seed)
                plant_stale_read(events, at)
                history = history_of(events)
                took, result = best(partial(check, history, "register", options), options)
                key = result.keys[-1]
                print(
                    f"{ops:>6}{info:>5.0%} {where:<8}{result.verdict:>18}{took * 1000:>10.1f}"
                    f"{key.steps:>12,}{key.cache_entries:>11,}"
                )


def main() -> None:
    """Print the three tables (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2_000, help="operations per generated history")
    parser.add_argument("--processes", type=int, nargs="+", default=[2, 8, 16, 50])
    parser.add_argument(
        "--info", type=float, nargs="+", default=[0.03, 0.0], help="shares of info operations"
    )
    parser.add_argument("--timeout", type=float, default=5.0, help="each check's bound (s)")
    parser.add_argument("--histories", type=int, default=3, help="generated ones per cell")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args()
    generated(options)
    porcupine(options)
    violation(options)


if __name__ == "__main__":
    main()
