"""Every extra the docs name exists, and a client install pulls no server dependency.

``pip install tenure`` is a client; ``pip install 'tenure[server]'`` adds what
``tenure serve`` uses (uvloop; the server falls back to asyncio's loop without it).
The docs are grepped, so an extra renamed or dropped in pyproject.toml fails here
instead of failing a reader.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tenure.backends import EXTRAS as BACKEND_EXTRAS
from tenure.errors import ConfigError
from tenure.server._startup import loop_factory

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS = set(PYPROJECT["project"]["optional-dependencies"])

#: ``tenure[a,b]``, ``'.[a]'`` (an install from the checkout), ``scripts/bootstrap a,b``.
NAMED = re.compile(r"(?:\btenure|(?<![\w\]])\.)\[([A-Za-z0-9_,\s-]+)\]")
BOOTSTRAP = re.compile(r"scripts/bootstrap ([a-z0-9_,-]+)")


def places() -> list[Path]:
    """Where a reader (or an error message) may name an extra."""
    found = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "Makefile"]
    found += sorted((ROOT / "docs").glob("*.md"))
    found += sorted((ROOT / "examples").glob("*.md")) + sorted((ROOT / "examples").glob("*.py"))
    found += sorted((ROOT / "scripts").iterdir())
    found += sorted((ROOT / "src").rglob("*.py"))
    return [path for path in found if path.is_file()]


def named_extras() -> dict[str, set[str]]:
    """Each extra named anywhere, and the files that name it."""
    named: dict[str, set[str]] = {}
    for path in places():
        text = path.read_text()
        groups = NAMED.findall(text) + BOOTSTRAP.findall(text)
        for group in groups:
            for extra in group.split(","):
                # An upper-case name is a placeholder ("tenure[X]"), not an extra.
                if extra.strip() and not extra.strip().isupper():
                    named.setdefault(extra.strip(), set()).add(str(path.relative_to(ROOT)))
    return named


def test_the_docs_name_extras_at_all() -> None:
    # The patterns must keep finding what the docs say, or the next test checks nothing.
    named = named_extras()
    assert {"server", "etcd", "redis", "postgres", "test"} <= set(named), named
    assert "README.md" in named["server"]


def test_every_extra_the_docs_name_exists() -> None:
    missing = {extra: sorted(files) for extra, files in named_extras().items()}
    missing = {extra: files for extra, files in missing.items() if extra not in EXTRAS}
    assert not missing, f"extras named but not in pyproject.toml: {missing}"


def test_every_extra_a_backend_asks_for_exists() -> None:
    # The UnsupportedError of a backend whose libraries are missing names its extra.
    assert set(BACKEND_EXTRAS.values()) <= EXTRAS


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0] for requirement in requirements}


def test_a_client_install_pulls_no_server_dependency() -> None:
    client = requirement_names(PYPROJECT["project"]["dependencies"])
    server = requirement_names(PYPROJECT["project"]["optional-dependencies"]["server"])
    assert "uvloop" in server
    assert not client & server, f"the client would pull {client & server}"


def extra_requirements(extra: str) -> set[str]:
    """The names an extra pulls, through the extras it names (``tenure[cli]``) too."""
    names: set[str] = set()
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        inner = re.fullmatch(r"tenure\[([a-z0-9_,-]+)\]", requirement.split(";")[0].strip())
        if inner is None:
            names |= requirement_names([requirement])
        else:
            for named in inner[1].split(","):
                names |= extra_requirements(named)
    return names


def test_the_server_extra_brings_the_cli() -> None:
    # Issue 50: `pip install 'tenure[server]'` then `tenure --version` (as the README
    # says) failed for want of the cli extra.
    cli = extra_requirements("cli")
    assert {"click", "rich"} <= cli
    assert cli <= extra_requirements("server")


def test_the_built_metadata_has_the_server_extra_pull_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What pip reads: the wheel's METADATA, as hatchling writes it (the self-reference
    # tenure[cli] expanded into the server extra's own requirements).
    from hatchling.build import prepare_metadata_for_build_wheel

    monkeypatch.chdir(ROOT)
    info = prepare_metadata_for_build_wheel(str(tmp_path))
    metadata = (tmp_path / info / "METADATA").read_text()
    server = {
        re.split(r"[\s<>=!~;\[]", line.removeprefix("Requires-Dist: "), maxsplit=1)[0]
        for line in metadata.splitlines()
        if line.startswith("Requires-Dist: ") and "extra == 'server'" in line
    }
    assert {"click", "rich", "aiohttp"} <= server, metadata


def test_the_repo_installs_the_server_extra() -> None:
    # scripts/start (through scripts/bootstrap) runs the server: it installs the extra.
    assert 'spec=".[server' in (ROOT / "scripts" / "bootstrap").read_text()
    assert "tenure[server]" in PYPROJECT["project"]["optional-dependencies"]["test"]


def test_the_server_falls_back_to_asyncio_without_uvloop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as when tenure[server] is absent
    assert loop_factory("auto") is None  # asyncio's own loop
    assert loop_factory("asyncio") is None
    with pytest.raises(ConfigError, match="uvloop is not installed"):
        loop_factory("uvloop")


def test_a_client_without_the_server_extra_imports_and_runs() -> None:
    # As after `pip install tenure`: uvloop cannot be imported, anywhere.
    program = (
        "import sys; sys.modules['uvloop'] = None\n"
        "import asyncio, tenure, tenure.sync, tenure.server\n"
        "async def main():\n"
        "    async with tenure.connect('memory://') as client:\n"
        "        await client.create_node('n')\n"
        "        async with client.session('n') as s, s.mutex('m') as lock:\n"
        "            print('token', lock.token)\n"
        "asyncio.run(main())\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "token 1\n", "")
