"""The command line of the fault suite's long mode (``scripts/faults``).

Only the standard library, and nothing of :mod:`tools.faults` beyond its empty
package: ``scripts/faults`` checks its arguments with the system's Python
(``python3 -m tools.faults.cli ARGS``: the help for ``--help``, exit status 2 and
the reason for a wrong argument) before it installs anything. The names of the
targets and scenarios are repeated here for that reason; a test keeps them equal
to :data:`tools.faults.report_texts.TARGETS` and :data:`tools.faults.scenarios.SCENARIOS`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

__all__ = ["REPO", "SCENARIO_NAMES", "TARGET_NAMES", "main", "parser"]

#: The repository (docs/reliability.md is written under it).
REPO: Final = Path(__file__).resolve().parents[2]
#: The targets, in the report's order.
TARGET_NAMES: Final = ("tenure", "tenure-cluster", "etcd", "redis", "postgres")
#: The scenarios, in the report's order.
SCENARIO_NAMES: Final = (
    "crash",
    "cluster-crash",
    "failover",
    "network",
    "pause-clock",
    "disk",
    "power",
    "tenant",
    "linearizable",
)

DESCRIPTION: Final = """\
Long mode of the fault suite (tools/faults): each scenario runs for --minutes of
faults against a fresh server of each target it applies to, with more workers than
short mode (pytest tests/faults), then docs/reliability.md (and its JSON) is
written: the results of the (target, scenario) pairs run replace earlier ones, the
others stay. On tenure: crash, network, pause-clock, disk, power, tenant (a hostile
tenant among honest clients, its tokens limited); on tenure-cluster:
failover, network, pause-clock; on etcd: cluster-crash, network, pause-clock; on
redis and postgres: crash, network, pause-clock; and on every target linearizable
(random operations of registers, counters, mutexes, groups and watches, checked by
lincheck; 230 min of faults in all at the default --minutes). Needs root (the disk
scenario mounts a tmpfs; linearizable runs tenure-cluster in network namespaces, cut
by the kernel), iproute2 and Debian's etcd-server, redis-server and postgresql
(scripts/bootstrap test installs them).
Exits 1 if a rule was broken, 2 if a target cannot run here.
"""

TARGET_HELP: Final = (
    "tenure (a `tenure serve`), tenure-cluster (three `tenure serve --cluster` over a "
    "three-member etcd cluster), etcd (a three-member etcd cluster), redis (a "
    "redis-server) or postgres (a PostgreSQL 15); repeatable; default: all"
)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            what = "a whole number" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0: {text}")
        return value

    return convert


def parser() -> argparse.ArgumentParser:
    """The parser of ``scripts/faults`` (``python -m tools.faults``)."""
    parser = argparse.ArgumentParser(
        prog="scripts/faults",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # No abbreviations: scripts/faults tells a help request by its exact -h, --help.
        allow_abbrev=False,
    )
    parser.add_argument("--target", choices=TARGET_NAMES, action="append", help=TARGET_HELP)
    parser.add_argument(
        "--minutes", type=_positive(float), default=10.0, help="faults per scenario (default: 10)"
    )
    parser.add_argument(
        "--only",
        "--scenario",
        choices=SCENARIO_NAMES,
        action="append",
        dest="only",
        help="repeatable; scenarios that do not apply to a target are left out",
    )
    parser.add_argument(
        "--workers",
        type=_positive(int),
        default=8,
        help="worker processes, two clients each (default: 8)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO / "docs" / "reliability.md",
        help="the page to write (default: docs/reliability.md)",
    )
    parser.add_argument("--keep", action="store_true", help="keep each run's history (under /tmp)")
    soak = parser.add_argument_group(
        "soak",
        "--soak HOURS runs the soak instead of the scenarios (tools/faults/soak.py): one "
        "tenure serve with every face, a mixed load, faults; its RSS, open files, threads, "
        "data directory and engine state sampled and judged bounded. It writes "
        "tools/faults/soak.md (included in the --out page), docs/soak.png and "
        "docs/soak.json, and exits 1 if something grew without bound.",
    )
    soak.add_argument("--soak", type=_positive(float), metavar="HOURS", help="run the soak")
    soak.add_argument(
        "--fault-every",
        type=_positive(float),
        default=180.0,
        metavar="SECONDS",
        help="soak: a fault about this often (default: 180)",
    )
    soak.add_argument(
        "--crash-every",
        type=_positive(float),
        default=3600.0,
        metavar="SECONDS",
        help="soak: a server crash this often (default: 3600; a crash resets what a leak "
        "grew, so the server's lives must be long to judge its memory)",
    )
    soak.add_argument(
        "--sample-every",
        type=_positive(float),
        default=10.0,
        metavar="SECONDS",
        help="soak: a sample this often (default: 10)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Check the arguments: print the help and exit 0 on ``-h``/``--help``, exit 2
    saying why on a wrong one, else return 0 (nothing is run)."""
    parser().parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
