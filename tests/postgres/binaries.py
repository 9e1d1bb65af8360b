"""Where PostgreSQL's programs are, and who runs them (PostgreSQL refuses root)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_BINDIR", "pg_bindir", "postgres_unavailable", "server_user"]

#: Debian's PostgreSQL 15 (package postgresql-15).
DEFAULT_BINDIR: Final = "/usr/lib/postgresql/15/bin"


def pg_bindir() -> Path | None:
    """Where ``initdb`` and ``postgres`` are: ``$TENURE_PG_BIN``, Debian's 15, pg_config."""
    override = os.environ.get("TENURE_PG_BIN", "").strip()
    if override:
        return _bindir(override)
    found = _bindir(DEFAULT_BINDIR)
    pg_config = shutil.which("pg_config")
    if found is None and pg_config is not None:
        result = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=False
        )
        found = _bindir(result.stdout.strip())
    return found


def _bindir(candidate: str) -> Path | None:
    path = Path(candidate)
    if candidate and all(os.access(path / name, os.X_OK) for name in ("initdb", "postgres")):
        return path
    return None


def server_user() -> pwd.struct_passwd | None:
    """The user the server runs as when we are root (``postgres``); None: ourselves."""
    if os.geteuid() != 0:
        return None
    return pwd.getpwnam("postgres")


def postgres_unavailable() -> str | None:
    """Why no PostgreSQL server can be started here (to skip, or fail in CI), or None."""
    if pg_bindir() is None:
        return (
            "PostgreSQL's initdb/postgres are not installed (scripts/bootstrap test installs"
            f" Debian's postgresql; or set TENURE_PG_BIN; looked in {DEFAULT_BINDIR})"
        )
    if os.geteuid() == 0:
        try:
            server_user()
        except KeyError:
            return "running as root, and there is no 'postgres' user to run PostgreSQL as"
    return None
