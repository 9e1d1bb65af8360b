"""Every shell block of the pages runs (issue 57): its commands with bash, in a
directory of its own, against the servers the page names, each as the page says it
behaves (tests/docs/shell.py, tests/docs/shell_pages.py)."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tenure.sync
from tests.cluster.harness import TenureCluster
from tests.docs.blocks import ROOT, Block
from tests.docs.conftest import DocServers
from tests.docs.roles import Role, blocks_of, ids, page_of
from tests.docs.shell import EVERY_PAGE, SERVE, BlockRun, Line, Places, commands, placed, served
from tests.docs.shell_pages import BLOCKS, ShellBlock
from tests.ports import free_port
from tests.server.wire import ServerProcess

SHELL = blocks_of(Role.SHELL)

#: The admin token of the ``admin`` servers' auth file (read-write, every node).
SECRET = "docs-admin-secret"
AUTH = f'[[token]]\nname = "admin"\nsecret = "{SECRET}"\naccess = "read-write"\n'


def context_of(block: Block) -> ShellBlock:
    """The page's word on ``block`` (none: commands that need nothing)."""
    found = [
        context
        for (page, begins), context in BLOCKS.items()
        if page == page_of(block) and block.text.startswith(begins)
    ]
    assert len(found) <= 1, block.name
    return found[0] if found else ShellBlock()


def line_of(written: str, command: str, context: ShellBlock) -> Line:
    """What the page says of a command: the first of its lines that matches the command
    as written, else the first rule of every page that matches it as it runs."""
    for line in context.lines:
        if re.search(line.match, written):
            return line
    for line in EVERY_PAGE:
        if re.search(line.match, command):
            return line
    return Line("")


@pytest.fixture
def block_servers(
    request: pytest.FixtureRequest, tmp_path: Path, docs_servers: DocServers
) -> Iterator[Callable[[ShellBlock], dict[str, str]]]:
    """``servers(context)``: the addresses of the servers the block names (its own
    ones started now, killed at its end)."""
    own: list[ServerProcess | TenureCluster] = []

    def servers(context: ShellBlock) -> dict[str, str]:
        found = {"secret": SECRET}
        for kind in context.servers:
            if kind == "tenure":
                server = ServerProcess(tmp_path / "server", "--fsync", "off").__enter__()
                own.append(server)
                found["tenure"] = f"127.0.0.1:{server.port}"
            elif kind == "admin":
                (tmp_path / "auth.toml").write_text(AUTH)
                extra = ("--fsync", "off", "--auth-file", str(tmp_path / "auth.toml"))
                http = free_port()
                server = ServerProcess(tmp_path / "server", *extra, "--http-port", str(http))
                own.append(server.__enter__())
                found["tenure"] = f"127.0.0.1:{server.port}"
                found["http"] = str(http)
            elif kind in ("cluster", "cluster-auth"):
                etcd = request.getfixturevalue("etcd_member")
                if kind == "cluster":
                    cluster = docs_servers.cluster(etcd)
                else:
                    (tmp_path / "auth.toml").write_text(AUTH)
                    auth = ("--auth-file", str(tmp_path / "auth.toml"))
                    cluster = TenureCluster(tmp_path / "cluster", etcd.endpoints, extra=auth)
                    cluster.open()
                    own.append(cluster)
                found["cluster"] = ",".join(member.address for member in cluster.servers)
                for i, member in enumerate(cluster.servers):
                    found[f"cluster{i}"] = member.address
                    found[f"cluster{i}_http"] = f"127.0.0.1:{member.http_port}"
            elif kind == "etcd":
                found["etcd"] = ",".join(request.getfixturevalue("etcd_member").endpoints)
            else:
                raise AssertionError(f"a shell block names a server nobody starts: {kind!r}")
        return found

    try:
        yield servers
    finally:
        for server in own:
            server.close() if isinstance(server, TenureCluster) else server.kill()


@pytest.mark.parametrize(
    "block",
    # (slow by the page's word on the block, not by its line: a line moves with every edit)
    [pytest.param(b, marks=[pytest.mark.slow] if context_of(b).slow else []) for b in SHELL],
    ids=ids(SHELL),
)
def test_a_shell_block_runs_as_the_page_says(
    block: Block, tmp_path: Path, block_servers: Callable[[ShellBlock], dict[str, str]]
) -> None:
    context = context_of(block)
    places = Places(block_servers(context))
    where = tmp_path / "here"
    where.mkdir()
    if context.files is not None:
        context.files(where)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_", "TENURE_"))
    }
    env.update({key: places.fill(value) for key, value in context.env.items()})
    run = BlockRun(where, env, places)
    if context.nodes:
        with tenure.sync.connect(f"tenure://{places.servers['tenure']}") as client:
            for node in context.nodes:
                client.create_node(node)
    try:
        for command in context.before:
            run.run(places.fill(command), Line(""))
        for command, line in context.beside:
            run.run(places.fill(command), line)
        for written in commands(block.text):
            command = placed(written, context.substitutions, places)
            line = line_of(written, command, context)
            if line.skip is not None:
                run.report.append(f"$ {written}  (not run: {line.skip})")
                continue
            if SERVE.match(command):
                command = served(command, places)
            run.run(places.fill(command) + line.append, line)
        if context.check:
            run.run(places.fill(placed(context.check, {}, places)), Line(""))
    finally:
        run.stop()


def test_every_block_context_names_one_block() -> None:
    for page, begins in BLOCKS:
        named = [b for b in SHELL if page_of(b) == page and b.text.startswith(begins)]
        assert len(named) == 1, (page, begins)


def test_a_skipped_install_installs_what_its_comment_says() -> None:
    # README.md: "scripts/bootstrap testing  # the kit's pytest, pytest-asyncio,
    # hypothesis into .venv": not run here (an install), but what it installs is read.
    testing = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = testing["optional-dependencies"]["testing"]
    names = {re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0] for requirement in requirements}
    assert {"pytest", "pytest-asyncio", "hypothesis"} <= names
    assert 'spec=".[server,cli,$extras]"' in (ROOT / "scripts" / "bootstrap").read_text()
