"""``python -m tenure.testing.sim`` as a user runs it (scripts/sim runs the same in the
checkout's venv), in child interpreters: one seed's hash on any interpreter, every
mutant found, a failure shrunk to a witness that replays, and a few hundred seeds of
the server target holding (issue 59; docs/testing.md)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tenure.testing.sim._mutants import MUTANTS

pytestmark = pytest.mark.timeout(600)

#: The seed that finds each mutant first (``scripts/sim --mutants`` prints them). A
#: change that moves a schedule can move these: run it again and put its seeds here;
#: a mutant that needs many more seeds than before is a weaker simulation.
FOUND_BY = {
    "resent-update": (14, "linearizable:watch"),
    "stalled-release": (1, "linearizable:mutex"),
    "token-reset": (1, "linearizable:mutex"),
    "lost-swap": (1, "linearizable:register"),
    "torn-record": (8, "restart"),
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
    seed, rule = FOUND_BY[mutant]
    status, out = sim("--seed", str(seed), "--mutant", mutant, "--no-shrink", cwd=tmp_path)
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
def test_a_few_hundred_seeds_of_the_server_hold(tmp_path: Path) -> None:
    status, out = sim(
        "--seeds", "200", "--minutes", "0.5", "--clients", "4", "--jobs", "2", cwd=tmp_path
    )
    assert status == 0, out
    assert "200 runs, 0 broke a rule" in out
