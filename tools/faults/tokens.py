"""The tokens of the hostile-tenant scenario: who may do what, and the auth file saying so.

Ten tokens share one ``tenure serve`` (``--auth-file``):

* ``admin``: read-write, every node. The harness makes the nodes and the large state
  with it, and the observer reads with it.
* ``honest``: read-write, limited to the workload's node (``faults``). The worker
  processes' clients use it: they hold and pass the locks, with short windows.
* ``mallory``: read-write, limited to its own nodes (``jobs-*``): the hostile tenant.
  It cannot see the workload's node nor the 10,000 nodes of others.
* ``flooder``: as ``mallory``, the hostile tenant's flood of requests (its own token,
  so that the flood's ``requests_per_second`` is a bucket of its own, below).
* ``reader``: read-only, limited to the workload's node: a monitoring token that may
  open sessions and watch there, and nothing else.
* ``watcher``: as ``reader``, with no quota table of its own (a read-only token's
  defaults: its prefix watches, issue 47), for the detached prefix watches.
* ``bulk``: read-write, limited to ``jobs-*``, with no quota table: the writer of
  issue 47 that makes deep rate-limiter resources and long wait cycles, each within
  what it may (its own bucket, so that ``mallory``'s quotas count only its abuses).
* ``claimer``: read-write, limited to ``jobs-*``, with a data quota of its own (1 MiB):
  its claims of 64 KiB each must stop at it (issue 47: claims skipped it).
* ``auditor``: read-only, limited to the node of those resources (YDB's
  ``ListResources``); ``ops``: read-only, limited to the node of big groups (the
  dashboard's view of it).

The quotas (``[token.quota]``, issue 37) are set small for ``mallory``, ``flooder``
and ``reader`` so that the bounded abuses of :mod:`tools.faults.abuses` run into them:
a refusal naming the quota and the token is what the scenario counts.
:data:`WITH_QUOTAS` says whether the auth file carries them (a server that does not
know ``[token.quota]`` refuses to load such a file: switch it off to run the scenario
against one). ``requests_per_second`` is the flood's, on a token of its own and low
(100): a machine so loaded that the flood's 32 tasks got 244 answers a second (1,221
in a 5 s phase, seen) still outruns it, where a rate high enough for ``mallory``'s
other abuses to get their answers (they share a token's bucket) was outrun only on a
machine at ease, and the abuses that met their quotas through it (``waiters``) lost
half their requests to the flood's refusals.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: Whether the auth file gives ``mallory`` and ``reader`` the quotas of :data:`QUOTAS`
#: (on: once ``tenure serve`` understands ``[token.quota]``; see the module docstring).
WITH_QUOTAS: Final = True

#: The workload's node (the harness's :data:`~tools.faults.harness.NODE`).
HONEST_NODE: Final = "faults"
#: The hostile tenant's own nodes: the one it works in, and the one the admin filled
#: with :data:`BIG_SEMAPHORES` semaphores for its listings.
JOBS_NODE: Final = "jobs-0"
BIG_NODE: Final = "jobs-big"
#: Nodes of others that ``mallory`` cannot see (its ListNodes filters them out), named
#: to sort before its own (a page of its nodes is found past all of them), and
#: semaphores in its big node (its ListSemaphores pages through them).
OTHER_PREFIX: Final = "batch-"
OTHER_NODES: Final = 10_000
BIG_SEMAPHORES: Final = 20_000
#: Semaphores (limit 1) the admin makes in ``mallory``'s node for its queued acquires:
#: made by the admin, they are not ``mallory``'s to count against its semaphore quota.
QUEUES: Final = 60
#: The nodes of issue 47's abuses (tools/faults/abuses_surfaces.py), made by the
#: admin: the deep rate-limiter resources', the long wait cycles', and the one of
#: :data:`GROUPS` groups of :data:`MEMBERS` members each (the admin's detached
#: sessions hold them: :func:`tools.faults.tenant.fill`).
LIMITS_NODE: Final = "jobs-limits"
CYCLE_NODE: Final = "jobs-cycle"
GROUPS_NODE: Final = "jobs-groups"
GROUPS: Final = 60
MEMBERS: Final = 1_000
#: ``--max-nodes`` of the scenario's server: the others' nodes, and room for the rest.
MAX_NODES: Final = OTHER_NODES + 1_000

#: Each token's quotas when :data:`WITH_QUOTAS`; chosen below what one round of
#: abuses asks (tools/faults/abuses.py's counts), so that each quota refuses.
QUOTAS: Final[dict[str, dict[str, int]]] = {
    "mallory": {
        "sessions": 100,
        "waiters": 100,
        "semaphores": 60,
        "nodes": 5,
        "data_bytes": 1024 * 1024,
        "recovery_window": 600,
    },
    "flooder": {"requests_per_second": 100},
    "reader": {"sessions": 60, "watches": 300, "recovery_window": 300},
    "claimer": {"data_bytes": 1024 * 1024},
}


@dataclass(frozen=True)
class Token:
    """One token of the auth file."""

    name: str
    secret: str
    access: str
    nodes: tuple[str, ...] = ()

    def toml(self, quotas: dict[str, int] | None) -> str:
        """Its ``[[token]]`` table (and ``[token.quota]`` if ``quotas``)."""
        lines = [
            "[[token]]",
            f'name = "{self.name}"',
            f'secret = "{self.secret}"',
            f'access = "{self.access}"',
        ]
        if self.nodes:
            lines.append("nodes = [" + ", ".join(f'"{node}"' for node in self.nodes) + "]")
        if quotas:
            lines += ["[token.quota]", *(f"{key} = {value}" for key, value in quotas.items())]
        return "\n".join(lines) + "\n"


ADMIN: Final = Token("admin", "admin-9f3c2e7a41d8b6", "read-write")
HONEST: Final = Token("honest", "honest-5b1e8d2c7f4a93", "read-write", (HONEST_NODE,))
MALLORY: Final = Token("mallory", "mallory-c4a7e19b3d6f20", "read-write", ("jobs-*",))
FLOODER: Final = Token("flooder", "flooder-7e2b9d4c1a5f38", "read-write", ("jobs-*",))
READER: Final = Token("reader", "reader-2d8f6a0c5e1b74", "read-only", (HONEST_NODE,))
WATCHER: Final = Token("watcher", "watcher-8c3f1a6e2d9b57", "read-only", (HONEST_NODE,))
CLAIMER: Final = Token("claimer", "claimer-9d4b2f7e1a6c35", "read-write", ("jobs-*",))
BULK: Final = Token("bulk", "bulk-3e9a7c1f5b2d86", "read-write", ("jobs-*",))
AUDITOR: Final = Token("auditor", "auditor-6b2d8f4a1c7e39", "read-only", (LIMITS_NODE,))
OPS: Final = Token("ops", "ops-1f7c5a9e3b8d24", "read-only", (GROUPS_NODE,))
TOKENS: Final = (
    *(ADMIN, HONEST, MALLORY, FLOODER, READER),
    *(WATCHER, CLAIMER, BULK, AUDITOR, OPS),
)


def auth_file_text(with_quotas: bool = WITH_QUOTAS) -> str:
    """The auth file of the scenario's server (quotas as :data:`WITH_QUOTAS` says)."""
    return "\n".join(
        token.toml(QUOTAS.get(token.name) if with_quotas else None) for token in TOKENS
    )


def write_auth_file(path: Path) -> Path:
    """Write the auth file to ``path`` (owner-readable only: it holds secrets)."""
    path.write_text(auth_file_text())
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Tenancy:
    """What the tenant nemesis needs of a run: where to reach the server, as whom."""

    #: ``tenure://host:port`` without a token (:func:`~tools.faults.target.with_token`).
    url: str
    #: The server's HTTP port (``/metrics``, the dashboard).
    http_port: int
    #: The YDB face's port (``--ydb-port``: the rate-limiter resources' listing).
    ydb_port: int
