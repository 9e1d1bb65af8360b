"""A copy of this checkout as a clone of it would be, for the flows the README runs in one.

:func:`clone_like` copies the files git knows of (tracked, and new ones it does not
ignore: what the next commit's clone would have), not ``.venv``, ``build`` or any
other ignored file. Where this checkout's compiled build is current
(``scripts/compile --check``: what ``scripts/test`` makes before the service tier), its
extensions are copied too, with their times, so that the copy's ``scripts/start``
finds them current and runs the compiled build without a minute of mypyc; elsewhere
the copy's ``scripts/start`` compiles, as on a fresh clone.

:func:`offline` is the environment that makes the copy's ``scripts/bootstrap`` install
from the run's wheelhouse alone (pip reads ``PIP_NO_INDEX`` and ``PIP_FIND_LINKS``, its
build isolation's pip too): the same commands, no registry round trip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.install.matrix import ROOT
from tools import compile as compile_tool

__all__ = ["clone_like", "offline"]


def clone_like(into: Path) -> bool:
    """Copy the checkout into ``into`` (module docstring); whether its compiled build
    came along."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # (a tracked file deleted in the work tree is not copied)
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    if not compile_tool.current():
        return False
    for extension in compile_tool.artifacts():
        shutil.copy2(extension, into / "src" / extension.relative_to(compile_tool.SRC))
    return True


def offline(house: Path) -> dict[str, str]:
    """pip's settings for installing from ``house`` alone."""
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(house)}
