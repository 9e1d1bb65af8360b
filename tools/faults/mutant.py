"""Mutants: tenure with one planted bug, to prove the checkers catch what they claim.

``python -m tools.faults.mutant NAME serve ARGS...`` runs ``tenure serve`` and
``python -m tools.faults.mutant NAME worker CONFIG`` runs a fault worker, after
monkeypatching one function of tenure. Nothing in tenure itself knows about
mutants. Each mutant names the checker rule that must catch it:

* ``limit`` (server): a grant skips the limit check, so a busy mutex is granted
  again (run with ``python -O``: the engine's own assertion would stop it
  first). Caught by ``overlap`` and ``linearizable:mutex``.
* ``token-reset`` (server): the fencing counter is not persisted across a
  restart (it starts again from 0). Caught by ``token-order``,
  ``fenced-write-refused`` and ``linearizable:mutex``.
* ``drop-push`` (server): one Granted push in ten is never written (as when a
  connection dies with it in flight). The waiter hangs, and everyone queued
  behind it. Caught by ``hang`` and ``no-progress``.
* ``no-cancel`` (client): a lost lease no longer cancels the body of
  ``async with``. Caught by ``loss-not-cancelled`` (and ``overlap``).
* ``lost-swap`` (server): one compare-and-set of a semaphore's data in five that
  should swap answers that it did, and changes nothing (a lost write, a counter's
  lost add): of each name, the first that should swap and every fifth after it, so
  that every register and counter loses one early, however few swaps a slow machine
  serves in the run. Run by the ``linearizable`` scenario; caught by
  ``linearizable:counter`` and ``linearizable:register``.
* ``ydb-stale-read`` (server): YDB's face answers a describe with the semaphore's
  data as it was up to :data:`STALE_FOR` seconds before (a read served from a copy kept
  too long: long enough that a short run's few YDB reads meet a write in it);
  tenure's own protocol reads it fresh. Run by the ``linearizable`` scenario, whose
  YDB clients read the registers the native clients write; caught by
  ``linearizable:register``.

A mutant imports tenure's pure build even where the compiled one is built
(scripts/compile): a patch of a class or function mypyc compiled does not take.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final


def _limit() -> None:
    from tenure._core.semaphore import Semaphore

    def fits(self: Semaphore, key: int, count: int, now: float) -> bool:
        return now >= self.blocked_until  # the count is not compared with the limit

    Semaphore.fits = fits  # type: ignore[method-assign]


def _token_reset() -> None:
    from tenure._core.engine import Engine
    from tenure.server._durability import journal as _journal

    original = _journal.resume  # type: ignore[attr-defined]

    def resume(engine: Engine, now: float) -> None:
        original(engine, now)
        engine.last_token = 0  # forgotten: not part of what survives a restart

    _journal.resume = resume  # type: ignore[attr-defined]


def _drop_push() -> None:
    from tenure._core import Effect, Granted
    from tenure._protocol.fanout import FiredPushes
    from tenure.server._net.gate import Conn
    from tenure.server._net.outbox import Outboxes

    original = Outboxes.push
    chance = random.Random(7)

    def push(self: Outboxes, conn: Conn, effect: Effect, fired: FiredPushes | None = None) -> None:
        if isinstance(effect, Granted) and chance.random() < 0.1:
            return  # never written
        original(self, conn, effect, fired)

    Outboxes.push = push  # type: ignore[method-assign]


def _no_cancel() -> None:
    from tenure.client._loss import CancelOnLoss

    def cancel_body(self: CancelOnLoss) -> None:
        return  # the loss is recorded, the body runs on

    CancelOnLoss.cancel_body = cancel_body  # type: ignore[method-assign]


def _lost_swap() -> None:
    from tenure._core import commands as c
    from tenure._core import engine
    from tenure._core.state import EngineState

    original = engine._HANDLERS[c.SwapSemaphoreData]
    # Counted per name, not drawn from one random stream: the registers swap far less
    # often than the counters, and a draw shared by both could leave a short run on a
    # loaded machine with no register's swap lost at all (nothing to catch).
    should_swap: dict[str, int] = {}

    def swap(state: EngineState, cmd: c.SwapSemaphoreData, now: float) -> object:
        _, node = state.lookup_session_node(cmd.session_id)
        sem = node.semaphores.get(cmd.name)
        if sem is not None and sem.data == cmd.expected:
            seen = should_swap[cmd.name] = should_swap.get(cmd.name, 0) + 1
            if seen % 5 == 1:
                return True  # "swapped", and nothing changed
        return original(state, cmd, now)

    engine._HANDLERS[c.SwapSemaphoreData] = swap


#: ``ydb-stale-read``: how long the face keeps a semaphore's data for its describes.
STALE_FOR: Final = 3.0


def _ydb_stale_read() -> None:
    import time

    from tenure.compat.ydb import semaphores

    original = semaphores._described
    kept: dict[str, tuple[float, bytes]] = {}

    def described(*args: Any) -> dict[str, Any]:
        fields = original(*args)
        name, now = fields["name"], time.monotonic()
        copy = kept.get(name)
        if copy is None or now - copy[0] > STALE_FOR:
            kept[name] = (now, fields["data"])
        else:
            fields["data"] = copy[1]  # the copy, up to STALE_FOR old
        return fields

    semaphores._described = described  # type: ignore[assignment]


#: Mutant name -> (the process it patches, the patch).
MUTANTS: Final[dict[str, tuple[str, Callable[[], None]]]] = {
    "limit": ("serve", _limit),
    "token-reset": ("serve", _token_reset),
    "drop-push": ("serve", _drop_push),
    "no-cancel": ("worker", _no_cancel),
    "lost-swap": ("serve", _lost_swap),
    "ydb-stale-read": ("serve", _ydb_stale_read),
}


def launcher(name: str) -> list[str]:
    """The interpreter arguments that run mutant ``name`` (before ``serve`` or the config)."""
    optimize = ["-O"] if name == "limit" else []
    return [*optimize, "-m", "tools.faults.mutant", name]


def pure_tenure() -> None:
    """Import tenure's modules from their sources from now on, not from mypyc's
    extensions beside them (call it before anything imports tenure)."""
    spec = importlib.util.find_spec("tenure")  # (finds the package without running it)
    assert spec is not None
    assert spec.submodule_search_locations is not None
    root = Path(next(iter(spec.submodule_search_locations))).resolve()
    sources_only = importlib.machinery.FileFinder.path_hook(
        (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
        (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
    )

    def hook(path: str) -> Any:
        if Path(path).resolve().is_relative_to(root):
            return sources_only(path)
        raise ImportError(path)  # not tenure's: the next hook finds it

    sys.path_hooks.insert(0, hook)
    sys.path_importer_cache.clear()


def main(argv: Sequence[str] | None = None) -> Any:
    """Entry point (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] not in MUTANTS or args[1] != MUTANTS[args[0]][0]:
        names = ", ".join(f"{name} {kind}" for name, (kind, _) in MUTANTS.items())
        print(f"usage: python -m tools.faults.mutant NAME serve|worker ...; one of: {names}")
        return 2
    name, kind, rest = args[0], args[1], args[2:]
    assert not any(module.startswith("tenure.") for module in sys.modules)
    pure_tenure()
    MUTANTS[name][1]()
    if kind == "serve":
        from tenure.__main__ import main as tenure_main

        return tenure_main(["serve", *rest])
    from tools.faults.worker import main as worker_main

    return worker_main(rest)


if __name__ == "__main__":
    sys.exit(main())
