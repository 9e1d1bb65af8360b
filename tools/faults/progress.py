"""Reading the workers' histories while they are written: who holds which session, who progresses.

The harness needs three things live: which worker a session belongs to (the pause
nemesis stops the worker that holds a lock), which workers are inside a critical
section's body now (the failover nemesis stops one there) and whether every client
has taken locks lately (the warm-up and the heal phase end when they all have). All
come from the workers' history files, read incrementally.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from tools.faults.history import now

_WORKER_FILE = re.compile(r"^w(\d+)\.jsonl$")


class _Tail:
    def __init__(self, path: Path, worker: int) -> None:
        self.path = path
        self.worker = worker
        self.offset = 0
        self.partial = b""
        self.kinds: dict[tuple[str, int], str] = {}
        #: Process -> fenced writes invoked in its open section (its body: two writes).
        self.sections: dict[str, int] = {}


class Progress:
    """Incremental reader of ``w<N>.jsonl`` in ``history_dir``."""

    def __init__(self, history_dir: Path) -> None:
        self.history_dir = history_dir
        self._tails: dict[Path, _Tail] = {}
        self._owner: dict[int, int] = {}  # session id -> worker index
        self.grants: dict[str, list[float]] = {}  # process -> times of granted acquires

    def worker_of(self, session: int) -> int | None:
        """The worker whose client opened ``session`` (as far as read so far)."""
        self.refresh()
        return self._owner.get(session)

    def refresh(self) -> None:
        """Read what was appended since the last call."""
        for path in self.history_dir.glob("w*.jsonl"):
            match = _WORKER_FILE.match(path.name)
            if match is None:
                continue
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = _Tail(path, int(match.group(1)))
            with path.open("rb") as file:
                file.seek(tail.offset)
                data = file.read()
            tail.offset += len(data)
            lines = (tail.partial + data).split(b"\n")
            tail.partial = lines.pop()
            for line in lines:
                self._line(tail, line)

    def _line(self, tail: _Tail, raw: bytes) -> None:
        try:
            line = json.loads(raw)
        except ValueError:
            return
        key = (line.get("p"), line.get("id"))
        if line.get("ev") == "inv":
            tail.kinds[key] = kind = line.get("kind")
            if kind == "section":
                tail.sections[line["p"]] = 0
            elif kind == "write" and line["p"] in tail.sections:
                tail.sections[line["p"]] += 1
        elif line.get("ev") == "done":
            kind = tail.kinds.pop(key, None)
            if kind == "section":
                tail.sections.pop(line["p"], None)
            elif line.get("outcome") != "ok":
                pass
            elif kind == "acquire":
                self.grants.setdefault(line["p"], []).append(line["t"])
            elif kind == "session-open" and line.get("session") is not None:
                self._owner[int(line["session"])] = tail.worker

    def in_body(self) -> list[int]:
        """The workers with a client inside a critical section's body now: granted, and
        its last fenced write not yet invoked (a write it makes from now on carries a
        token that may be stale by then)."""
        self.refresh()
        tails = self._tails.values()
        return sorted({t.worker for t in tails if any(n < 2 for n in t.sections.values())})

    def progressed(self, processes: list[str], since: float, grants: int) -> bool:
        """Whether each process took at least ``grants`` locks since ``since``."""
        self.refresh()
        return all(
            sum(t >= since for t in self.grants.get(process, [])) >= grants for process in processes
        )

    async def wait(self, processes: list[str], *, since: float, grants: int, until: float) -> bool:
        """Wait (until ``until`` at most) for :meth:`progressed`; whether it came."""
        while now() < until:
            if self.progressed(processes, since, grants):
                return True
            await asyncio.sleep(0.2)
        return self.progressed(processes, since, grants)
