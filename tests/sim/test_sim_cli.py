"""``python -m tenure.testing.sim`` as a user runs it (scripts/sim runs the same in the
checkout's venv), in child interpreters: one seed's hash on any interpreter, every
mutant found, a failure shrunk to a witness that replays, and seeds of each target
holding (issue 59; docs/testing.md)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tenure.testing.sim._mutants import MUTANT_TARGETS, MUTANTS

pytestmark = pytest.mark.timeout(600)

#: The target, the seed that finds each mutant first (``scripts/sim --mutants
#: [--target cluster ...]`` prints them) and the rule it breaks. A change that moves a
#: schedule can move these: run it again and put its seeds here; a mutant that needs
#: many more seeds than before is a weaker simulation.
FOUND_BY = {
    "resent-update": ("server", 293, "linearizable:watch"),
    "stalled-release": ("server", 1, "linearizable:mutex"),
    "token-reset": ("server", 1, "linearizable:mutex"),
    "lost-swap": ("server", 1, "linearizable:register"),
    "early-claim-end": ("server", 1, "claims:exclusive"),
    "torn-record": ("server", 1, "restart"),
    "failover-token-reset": ("cluster", 2, "linearizable:mutex"),
    "unfenced-append": ("cluster", 8, "no-progress"),
    "unfrozen-move": ("cells", 1, "cells"),
    "unraised-mark": ("cells", 1, "linearizable:mutex"),
}
#: The options of each target's runs here (a cluster's: as its mutants were sought).
TARGET_ARGS = {
    "server": (),
    "cluster": ("--target", "cluster", "--minutes", "0.5", "--clients", "8"),
    "cells": ("--target", "cells", "--minutes", "0.5", "--clients", "8"),
}


def sim(*args: str, hash_seed: str = "0", cwd: Path | None = None) -> tuple[int, str]:
    """Run the command line with ``args``; its exit status and output."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-m", "tenure.testing.sim", *args],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=540, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def test_every_mutant_has_its_seed() -> None:
    assert set(FOUND_BY) == set(MUTANTS)
    assert all(target in MUTANT_TARGETS[name] for name, (target, _, _) in FOUND_BY.items())


def test_a_seed_prints_one_hash_in_any_interpreter(tmp_path: Path) -> None:
    args = ("--seed", "11", "--minutes", "0.5", "--clients", "4")
    hashes = []
    for hash_seed in ("1", "2"):  # (the order of sets of strings differs between them)
        status, out = sim(*args, hash_seed=hash_seed, cwd=tmp_path)
        assert status == 0, out
        found = re.search(r"^history sha256: ([0-9a-f]{64})$", out, re.MULTILINE)
        assert found, out
        hashes.append(found.group(1))
        assert "verdict: every rule held" in out
    assert hashes[0] == hashes[1]


@pytest.mark.parametrize("mutant", sorted(FOUND_BY))
def test_each_mutant_is_found_by_its_seed(mutant: str, tmp_path: Path) -> None:
    target, seed, rule = FOUND_BY[mutant]
    args = ("--seed", str(seed), "--mutant", mutant, "--no-shrink", *TARGET_ARGS[target])
    status, out = sim(*args, cwd=tmp_path)
    assert status == 1, out
    assert re.search(rf"^  {re.escape(rule)}: ", out, re.MULTILINE), out
    assert f"replay: python -m tenure.testing.sim --seed {seed} " in out
    assert f"--mutant {mutant}" in out


def test_a_failure_is_shrunk_to_a_witness_that_replays(tmp_path: Path) -> None:
    status, out = sim("--seed", "1", "--mutant", "token-reset", cwd=tmp_path)
    assert status == 1, out
    found = re.search(r"^shrunk: python -m tenure.testing.sim (.*)$", out, re.MULTILINE)
    assert found, out
    args = shlex.split(found.group(1))
    assert int(args[args.index("--clients") + 1]) < 8  # (smaller than the run it shrank)
    status, again = sim(*args, "--no-shrink", cwd=tmp_path)
    assert status == 1, again
    assert re.search(r"^  linearizable:mutex: ", again, re.MULTILINE), again


@pytest.mark.slow
def test_seeds_of_the_server_hold(tmp_path: Path) -> None:
    # (with dflockd's face: its client is the repo's test dependency)
    status, out = sim(
        "--seeds", "60", "--minutes", "0.5", "--clients", "2", "--dflockd", "--jobs", "2",
        cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, out
    assert "60 runs, 0 broke a rule" in out


@pytest.mark.slow
def test_seeds_of_the_cluster_hold(tmp_path: Path) -> None:
    status, out = sim(
        "--target", "cluster", "--seeds", "20", "--minutes", "0.5", "--clients", "3",
        "--jobs", "2", cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, out
    assert "20 runs, 0 broke a rule" in out


@pytest.mark.slow
def test_seeds_of_a_service_of_cells_hold(tmp_path: Path) -> None:
    # (its node moved between the cells under the other faults: tenure.testing.sim._cells)
    status, out = sim(
        "--target", "cells", "--seeds", "12", "--minutes", "0.5", "--clients", "3",
        "--jobs", "2", cwd=tmp_path,
    )  # fmt: skip
    assert status == 0, out
    assert "12 runs, 0 broke a rule" in out


def test_what_a_crash_leaves_unawaited_is_not_warned_of(tmp_path: Path) -> None:
    # Seed 2001 crashes a member while a finally block of its would await a store's
    # close: a kill -9 runs none; the simulation closes the coroutine, silently.
    args = ("--target", "cluster", "--seed", "2001", "--minutes", "0.5", "--clients", "4")
    status, out = sim(*args, cwd=tmp_path)
    assert status == 0, out
    faults = re.search(r"^faults: (.*)$", out, re.MULTILINE)
    assert faults is not None, out
    assert " crash" in faults.group(1), out
    assert "never awaited" not in out, out
