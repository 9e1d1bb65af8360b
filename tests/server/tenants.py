"""Tenants of a real ``tenure serve``: the auth file of their tokens, and the server reading it.

A test of what one token can do to another (tests/server/quotas/, the auth tests) sets
tokens side by side on a server of its own: :func:`token` is one ``[[token]]`` table,
:func:`write_auth_file` the file of them, :class:`TenantServer` a ``tenure serve
--auth-file`` of it, with ``/metrics`` on an HTTP port of its own when asked.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .http import Samples, scrape
from .wire import WAIT, ServerProcess, free_port


def token(
    name: str,
    secret: str,
    access: str = "read-write",
    *,
    nodes: Sequence[str] = (),
    quota: Mapping[str, float] | None = None,
    hashed: bool = False,
) -> str:
    """One ``[[token]]`` table of an auth file, with its ``[token.quota]`` if given
    (``hashed``: the secret is written as its SHA-256 digest, ``secret_sha256``)."""
    if hashed:
        lines = ["[[token]]", f'name = "{name}"']
        lines.append(f'secret_sha256 = "{hashlib.sha256(secret.encode()).hexdigest()}"')
    else:
        lines = ["[[token]]", f'name = "{name}"', f'secret = "{secret}"']
    lines.append(f'access = "{access}"')
    if nodes:
        lines.append("nodes = [" + ", ".join(f'"{pattern}"' for pattern in nodes) + "]")
    if quota:
        lines.append("[token.quota]")
        lines += [f"{key} = {limit}" for key, limit in quota.items()]
    return "\n".join(lines) + "\n"


def slow_tokens(kinds: Iterable[str], face: str) -> tuple[str, ...]:
    """A token ``slow-KIND`` per request kind of a face, each of 0.01 requests a second
    (a burst of one), its secret ``FACE-slow-KIND-secret``: the rate tests of the faces."""
    return tuple(
        token(f"slow-{kind}", f"{face}-slow-{kind}-secret", quota={"requests_per_second": 0.01})
        for kind in kinds
    )


def auth_text(*tokens: str) -> str:
    """An auth file's text: the ``tokens`` tables (:func:`token`), in order."""
    return "\n".join(tokens)


def write_auth_file(directory: Path, *tokens: str, name: str = "auth.toml") -> Path:
    """The auth file of ``tokens`` (:func:`token`) written in ``directory``: its path."""
    path = directory / name
    path.write_text(auth_text(*tokens))
    return path


class TenantServer(ServerProcess):
    """``tenure serve --auth-file`` of ``auth_file`` on the data directory ``tmp_path/data``
    (the same on a restart: the journal is kept); with ``http``, ``/metrics`` too."""

    def __init__(self, tmp_path: Path, auth_file: Path, *extra: str, http: bool = False) -> None:
        self.auth_file = auth_file
        self.http_port = free_port() if http else 0
        flags = ("--http-port", str(self.http_port)) if http else ()
        # The wire clients of these tests do not ping, and the tests run tenure's
        # commands as subprocesses in between (seconds each beside a CPU hog): past the
        # default idle timeout (15 s) the server closed them, and a reload found none
        # of its tokens' connections to close. Not what these tests are about.
        if "--idle-timeout" not in extra:
            flags = (*flags, "--idle-timeout", "0")
        super().__init__(tmp_path / "data", "--auth-file", str(auth_file), *flags, *extra)

    async def metrics(self) -> Samples:
        """``/metrics`` of this server (started with ``http``), parsed."""
        assert self.http_port, "this server was started without http=True"
        return await scrape(self.http_port)


def audit_lines(path: Path, act: str, count: int = 1) -> list[dict[str, Any]]:
    """The audit log's lines of ``act`` once there are ``count`` (the writer is a
    thread: bounded by WAIT), or what there is then."""
    deadline = time.monotonic() + WAIT
    while True:
        text = path.read_text() if path.exists() else ""
        found = [json.loads(t) for t in text.splitlines() if t.startswith("{")]
        found = [line for line in found if line.get("act") == act]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.02)
