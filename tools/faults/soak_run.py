"""What a soak (:mod:`tools.faults.soak`) recorded: its samples and its faults, as JSON.

Kept apart from the soak that takes them, so the report (:mod:`tools.faults.soak_report`)
and the tests read a run without the machinery that makes one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Sample:
    """One reading (times in seconds since the soak began)."""

    t: float
    life: int  # which start of the server this is (1: the first)
    rss_kib: int
    fds: int
    threads: int
    log_bytes: int
    snapshot_bytes: int
    data_bytes: int
    connections: int
    gauges: dict[str, int] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    #: Client (``kind-index``) -> when its latest operation was (run time).
    last_op: dict[str, float] = field(default_factory=dict)


@dataclass
class Fault:
    """A fault injected at ``t``."""

    t: float
    kind: str  # client-kill, client-pause, server-pause, server-crash
    what: str
    ended: float | None = None  # when it was over: resumed, restarted (None: not recorded)

    @property
    def over(self) -> float:
        """When the fault was over (its start, where that was not recorded)."""
        return self.t if self.ended is None else self.ended


@dataclass
class SoakRun:
    """What a soak recorded."""

    seconds: float
    settings: dict[str, float]
    samples: list[Sample] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)

    def dump(self, path: Path) -> None:
        """Save the run as JSON."""
        path.write_text(json.dumps(asdict(self)) + "\n")

    @classmethod
    def load(cls, path: Path) -> SoakRun:
        """A run saved by :meth:`dump`."""
        raw = json.loads(path.read_text())
        return cls(
            seconds=raw["seconds"],
            settings=raw["settings"],
            samples=[Sample(**s) for s in raw["samples"]],
            faults=[Fault(**f) for f in raw["faults"]],
        )
