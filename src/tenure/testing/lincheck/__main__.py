"""``python -m tenure.testing.lincheck``: check a history file from a shell.

Exit status: 0 linearizable; 1 not linearizable (the witness printed); 2 unknown (a
bound passed), or a history or an argument that cannot be used (a clear message
naming the line). ``--help`` lists the options; ``--models`` the models and their
operations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Final

from tenure.testing.lincheck._check import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, check
from tenure.testing.lincheck._formats import FORMATS, read_history
from tenure.testing.lincheck._history import History, HistoryError
from tenure.testing.lincheck._models import MODELS
from tenure.testing.lincheck._search import LINEARIZABLE, NOT_LINEARIZABLE
from tenure.testing.lincheck._watches import check_watches, read_watches
from tenure.testing.lincheck._writer import read_histories

EXIT_LINEARIZABLE: Final = 0
EXIT_NOT_LINEARIZABLE: Final = 1
EXIT_UNKNOWN: Final = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tenure.testing.lincheck",
        description="Is a history of concurrent operations linearizable? Exit 0: yes; "
        "1: no (the witness is printed); 2: unknown (a bound passed) or unusable input.",
    )
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="the history ('-': standard input); several jsonl files (one per process, "
        "every event timed) are merged by time",
    )
    parser.add_argument("--model", choices=sorted(MODELS), help="the sequential specification")
    parser.add_argument(
        "--format", choices=sorted(FORMATS), default="jsonl", help="the file's format"
    )
    parser.add_argument(
        "--limit", type=int, help="the semaphore model's limit (else the history's header's)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds the search may take, past which the verdict is unknown "
        f"(default {DEFAULT_TIMEOUT:g}; 0: no bound)",
    )
    parser.add_argument(
        "--memory",
        type=float,
        default=DEFAULT_MEMORY_MB,
        metavar="MB",
        help=f"MiB the search's cache may take, past which the verdict is unknown "
        f"(default {DEFAULT_MEMORY_MB}; 0: no bound)",
    )
    parser.add_argument("--html", metavar="FILE", help="also draw the history as a timeline")
    parser.add_argument(
        "--watches",
        metavar="FILE",
        help="also check what watchers saw (their records, JSON lines) against the "
        "linearization: not linearizable (exit 1) if one saw what it could not",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument(
        "--models", action="store_true", help="list the models and their operations, and exit"
    )
    return parser


def _models_text() -> str:
    lines: list[str] = []
    for model in MODELS.values():
        lines.append(f"{model.name}: {model.summary}")
        lines += [f"  {f}: {doc}" for f, doc in model.operations.items()]
    return "\n".join(lines)


def _read(files: Sequence[str], format: str) -> History:
    if len(files) == 1:
        return read_history(files[0], format)
    if format != "jsonl":
        raise HistoryError(f"only jsonl files are merged; give one {format} file")
    return read_histories(files)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (module docstring); returns the exit status.

    An error of the checker itself is exit 2 (unknown), never 1 or 0: a verdict is
    said only of a history that was checked.
    """
    try:
        return _main(argv)
    except Exception as error:  # (a crash: whatever it was, nothing was checked)
        print(
            f"lincheck: internal error, no verdict: {type(error).__name__}: {error}",
            file=sys.stderr,
        )
        return EXIT_UNKNOWN


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.models:
        print(_models_text())
        return EXIT_LINEARIZABLE
    if args.model is None or not args.files:
        parser.print_usage(sys.stderr)
        print("lincheck: a --model and at least one FILE are needed", file=sys.stderr)
        return EXIT_UNKNOWN
    if args.limit is not None and args.limit < 1:
        print("lincheck: --limit is 1 or more", file=sys.stderr)
        return EXIT_UNKNOWN
    try:
        history = _read(args.files, args.format)
        header = {} if args.limit is None else {"limit": args.limit}
        result = check(
            history, args.model, timeout=args.timeout, memory_mb=args.memory, header=header
        )
        watched = None
        if args.watches and result.verdict == LINEARIZABLE:
            with open(args.watches, encoding="utf-8") as file:
                watched = check_watches(result, read_watches(file, args.watches))
    except HistoryError as error:
        print(f"lincheck: {error}", file=sys.stderr)
        return EXIT_UNKNOWN
    except OSError as error:
        print(f"lincheck: {error.filename}: {error.strerror}", file=sys.stderr)
        return EXIT_UNKNOWN
    if args.html:
        from tenure.testing.lincheck._html import write_html

        write_html(result, history, args.html)
    if args.json:
        data = result.to_dict()
        if watched is not None:
            data["watches"] = watched.to_dict()
        print(json.dumps(data, indent=2))
    else:
        print(result.explain())
        if watched is not None:
            print(f"watches: {watched.watchers} watcher(s), {watched.items} item(s) seen")
            print("\n".join(f"  {line}" for line in watched.violations + watched.unknown))
    if result.verdict == LINEARIZABLE:
        if watched is not None and watched.violations:
            return EXIT_NOT_LINEARIZABLE
        return EXIT_UNKNOWN if watched is not None and watched.unknown else EXIT_LINEARIZABLE
    return EXIT_NOT_LINEARIZABLE if result.verdict == NOT_LINEARIZABLE else EXIT_UNKNOWN


if __name__ == "__main__":
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # its output piped into `head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = EXIT_UNKNOWN
    sys.exit(status)
