"""Who runs each fenced block of the pages (:mod:`tests.docs.blocks`), as data.

A block's *role* is the runner that runs it, or checks it where it is not a
command: chosen by its language (and the words after it in the fence's info
string: ```` ```json output ````), or an :data:`EXEMPT` entry naming the block and
the reason it cannot run here. ``tests/docs/test_coverage.py`` holds every block to
exactly one, and every exemption to a block that exists.

* ``python``: a program or a fragment, run as written in its page's context
  (``PYTHON``); a file of tests, run by pytest in a project of its own (``PYTEST``);
* ``sh``: commands, run by bash in a directory of their own against the page's
  servers;
* ``console``: ``$ COMMAND`` lines and what they print: run, and the output
  compared; a block of any language tagged ``output``: what a command prints or a
  server logs, compared with a real run;
* ``toml``, ``ini``, ``yaml``, ``json``: a file, parsed, and loaded by our own loader
  where it is ours;
* ``sql``: run in a real PostgreSQL;
* ``text`` of docs/protocol.md: a layout or a frame, which must be the codec's own;
* ``ts`` of :data:`~tests.docs.blocks.TYPESCRIPT_PAGES`, and the ``sh`` and ``json``
  of :data:`~tests.docs.blocks.TYPESCRIPT_SETUP_PAGES` (its app's install and
  ``tsconfig.json``): the TypeScript runner's (tests/js_client).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import cache

from tests.docs.blocks import (
    ROOT,
    TYPESCRIPT,
    TYPESCRIPT_PAGES,
    TYPESCRIPT_SETUP_PAGES,
    Block,
    every_block,
)


class Role(enum.Enum):
    """What runs a block: the value is where."""

    PYTHON = "tests/docs/test_python_blocks.py"
    PYTEST = "tests/docs/test_pytest_blocks.py"
    SHELL = "tests/docs/test_shell_blocks.py"
    OUTPUT = "tests/docs/test_output_blocks.py"
    CONFIG = "tests/docs/test_config_blocks.py"
    SQL = "tests/docs/test_sql_blocks.py"
    PROTOCOL = "tests/protocol/test_docs.py"
    TYPESCRIPT = "tests/js_client (the TypeScript runner)"
    EXEMPT = "tests/docs/roles.py's EXEMPT: a reason it cannot run"


@dataclass(frozen=True)
class Exemption:
    """One block that no runner takes, named by its page and how its text begins."""

    page: str
    #: The block's first line begins so (and no other block's of the page does).
    begins: str
    reason: str

    def names(self, block: Block) -> bool:
        """Whether ``block`` is the one this exemption names."""
        return page_of(block) == self.page and block.text.startswith(self.begins)


_DIAGRAM = "a diagram, not code: nothing to run or compare"
_BENCH = (
    "a benchmark run: scripts/bench takes 5 minutes (--quick) to an hour of both cores; "
    "tests/bench checks its code, and no test takes its numbers"
)
_FIXED = (
    "the output of a bug since fixed, quoted from the run that found it: no run prints it any more"
)
#: The blocks no runner takes, each with its reason. Keep it short: what can run, runs.
EXEMPT: tuple[Exemption, ...] = (
    Exemption("docs/deploy.md", "docker build", "docker: no Docker engine runs in the tests"),
    Exemption("docs/deploy.md", "docker compose", "docker: no Docker engine runs in the tests"),
    Exemption(
        "docs/deploy.md",
        "deploy/image/build.sh /opt/tenure",
        "systemd: installs into /opt and /etc and enables a unit of the host's systemd "
        "(tests/deploy checks the unit with systemd-analyze and the build script as nobody)",
    ),
    Exemption(
        "docs/deploy.md",
        "kubectl apply",
        "kubectl: needs a Kubernetes cluster (tests/deploy/test_k8s.py checks the "
        "manifests against the Kubernetes schemas)",
    ),
    Exemption(
        "docs/backends.md",
        "etcdctl role add tenure",
        "etcdctl: not installed for the tests (Debian's etcd-client; they start etcd-server "
        "alone), and its `user add` asks for each password on a terminal",
    ),
    Exemption("docs/benchmarks.md", "scripts/bench --quick", _BENCH),
    Exemption("docs/benchmarks-etcd.md", "scripts/bench --quick", _BENCH),
    Exemption("docs/benchmarks-cluster.md", "scripts/bench --quick", _BENCH),
    Exemption("docs/concepts.md", " your code ─ tenure.client", _DIAGRAM),
    Exemption("docs/protocol.md", "+--------+", _DIAGRAM),
    Exemption("docs/protocol.md", "client                                   server", _DIAGRAM),
    Exemption("docs/protocol.md", "             CreateSession", _DIAGRAM),
    Exemption(
        "docs/cluster.md",
        "P id ",
        "a table of the keys a cluster keeps in etcd, with what each holds (prose)",
    ),
    Exemption(
        "docs/operations.md",
        "instance-id ",
        "a table of the files of a data directory, with what each holds (prose)",
    ),
    Exemption("docs/reliability.md", "w0c2 acquire mtx-1 -> ok 142", _FIXED),
    Exemption("docs/reliability.md", "w0c1 acquire m2 -> ok token 322", _FIXED),
    Exemption("docs/reliability.md", "w4c1 cas reg-1", _FIXED),
    Exemption("docs/reliability.md", "nemesis clock+jump +1h", _FIXED),
    Exemption("docs/reliability.md", '{"ts": 1795446094.686', _FIXED),
)

#: A Python block that is a file of tests: a test function at its top level.
_TEST_FILE = re.compile(r"^(async )?def test_", re.MULTILINE)

_CONFIG = frozenset({"toml", "ini", "yaml", "json"})
_SHELL = frozenset({"sh", "bash"})


def page_of(block: Block) -> str:
    """The block's page, relative to the repository (``docs/recipes.md``)."""
    return block.page.relative_to(ROOT).as_posix()


def exemption_of(block: Block) -> Exemption | None:
    """The exemption that names ``block``, if any."""
    return next((exemption for exemption in EXEMPT if exemption.names(block)), None)


def role_of(block: Block) -> Role | None:
    """The role of ``block``; None: no runner takes it (the coverage test fails)."""
    if exemption_of(block) is not None:
        return Role.EXEMPT
    page = page_of(block)
    if block.lang in TYPESCRIPT:
        return Role.TYPESCRIPT if page in TYPESCRIPT_PAGES else None
    if page in TYPESCRIPT_SETUP_PAGES and block.lang in _SHELL | {"json"}:
        return Role.TYPESCRIPT  # (its app's install lines and tsconfig.json)
    if "output" in block.tags or block.lang == "console":
        return Role.OUTPUT
    if block.lang == "python":
        return Role.PYTEST if _TEST_FILE.search(block.text) else Role.PYTHON
    if block.lang in _SHELL:
        return Role.SHELL
    if block.lang in _CONFIG:
        return Role.CONFIG
    if block.lang == "sql":
        return Role.SQL
    if block.lang == "text" and page == "docs/protocol.md":
        return Role.PROTOCOL
    return None


def blocks_of(role: Role) -> list[Block]:
    """Every block whose role is ``role``, page by page in order."""
    return list(_of(role))


@cache
def _of(role: Role) -> tuple[Block, ...]:
    return tuple(block for block in every_block() if role_of(block) is role)


def ids(blocks: list[Block]) -> list[str]:
    """Test ids of ``blocks``: their names (``docs/recipes.md:907``)."""
    return [block.name for block in blocks]
