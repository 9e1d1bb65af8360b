"""Measurements of the peer benchmarks, and their JSON form.

A :class:`Measure` is one metric of one (workload, system) pair: the median of its
samples, with the samples kept so the report (and a reader) can see the spread.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Measure:
    """One metric of one workload on one system: the median over ``samples``."""

    workload: str  # "seq" | "par" | "cont" | "hold" | "sessions" | "recovery" | "watch" | "ceiling"
    system: str  # a SYSTEMS name, or "echo-asyncio" / "echo-uvloop"
    metric: str  # e.g. "pairs_per_s", "acquire_p50_ms", "p99_ms", "jain", "max_overtaken"
    value: float  # the median over samples (nan when the run failed)
    unit: str
    samples: list[float] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The measure as plain JSON-able data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measure:
        """The inverse of :meth:`to_dict`."""
        return cls(
            workload=str(data["workload"]),
            system=str(data["system"]),
            metric=str(data["metric"]),
            value=float(data["value"]),
            unit=str(data["unit"]),
            samples=[float(s) for s in data.get("samples", [])],
            note=str(data.get("note", "")),
        )


def client_each(system: str) -> str:
    """The name of ``system``'s rows where each of the 32 workers has its own client."""
    return f"{system} (client each)"


def median_measure(
    workload: str, system: str, metric: str, unit: str, samples: list[float], note: str = ""
) -> Measure:
    """A measure whose value is the median of ``samples`` (nan when there are none)."""
    value = statistics.median(samples) if samples else float("nan")
    return Measure(workload, system, metric, value, unit, list(samples), note)


def dumps(measures: list[Measure]) -> str:
    """Measures as a JSON text (a list of objects)."""
    return json.dumps([m.to_dict() for m in measures], indent=1)


def loads(text: str) -> list[Measure]:
    """Measures from the JSON text of :func:`dumps`."""
    return [Measure.from_dict(d) for d in json.loads(text)]


def to_json(measures: list[Measure], path: Path) -> None:
    """Write measures to a JSON file (a list of objects), creating its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(measures) + "\n")


def from_json(path: Path) -> list[Measure]:
    """Read measures written by :func:`to_json`."""
    return loads(path.read_text())
