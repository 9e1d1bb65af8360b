"""Every TypeScript block of the JavaScript clients' READMEs (and of docs/javascript.md)
runs as written, in an app installed as the READMEs say.

The app is made as a user would make it: both packages packed (``npm pack``, whose
``prepack`` builds them), an ES module (``"type": "module"``) whose dependencies are
installed by the ``npm install`` lines of the READMEs' ``sh`` blocks (the tarballs'
``/path/to/tenure`` replaced by where they were packed), and the ``json`` block of
clients/js/README.md as its ``tsconfig.json``. Every ``ts`` block is one file of it;
``tsc --strict`` compiles them all; each runs with node against a ``tenure serve`` of
its own at the address it names (``127.0.0.1:6388``, the port substituted), and must
exit 0 within :data:`RUN_S` having printed exactly what its ``// prints:`` comments
say, in their order. The blocks are read by :func:`tests.docs.blocks.blocks`.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.docs.blocks import ROOT, TYPESCRIPT_SETUP_PAGES, Block, blocks, typescript_blocks
from tests.js_client.npm import EFFECT_DIR, JS_DIR, NPM_CI_S, NPM_TEST_S, env, packages_ready, run
from tests.js_client.serving import serving

#: The address every block names: the port is replaced by its server's.
ADDRESS: Final = "127.0.0.1:6388"
#: Where the READMEs' install lines find the tarballs.
CHECKOUT_PLACEHOLDER: Final = "/path/to/tenure/"
#: Bound of one block's run (its server already listening).
RUN_S: Final = 60.0
#: What a block says it prints: ``// ... prints: TEXT`` (one printed line each).
PRINTS: Final = re.compile(r"//.*?\bprints: (.*)$", re.MULTILINE)


def ts_blocks() -> list[Block]:
    """The TypeScript blocks of the pages whose every TypeScript block runs here
    (:data:`tests.docs.blocks.TYPESCRIPT_PAGES`), in order."""
    return typescript_blocks()


#: The READMEs whose ``sh`` blocks' install lines make the app, and whose ``json``
#: block (the first page's) is its ``tsconfig.json``.
SETUP: Final = tuple(ROOT / page for page in TYPESCRIPT_SETUP_PAGES)


def _stem(block: Block) -> str:
    """The block's file name in the app, without its extension."""
    return re.sub(r"[^A-Za-z0-9]+", "_", block.name).strip("_")


def _install_lines() -> list[str]:
    """The ``npm install`` lines of the READMEs' ``sh`` blocks, in order."""
    lines = []
    for page in SETUP:
        for block in blocks(page):
            if block.lang == "sh":
                lines += [
                    line for line in block.text.splitlines() if line.startswith("npm install")
                ]
    return lines


def _tsconfig() -> str:
    """clients/js/README.md's ``json`` block: the settings it tells a user to use."""
    (found,) = [block.text for block in blocks(SETUP[0]) if block.lang == "json"]
    json.loads(found)  # (it is JSON)
    return found


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The app the READMEs describe, with every block compiled in it."""
    with packages_ready():
        packed = tmp_path_factory.mktemp("packed")
        for package in (JS_DIR, EFFECT_DIR):
            run(["npm", "pack", "--silent", "--pack-destination", str(packed)], NPM_TEST_S, package)
        root = tmp_path_factory.mktemp("app")
        manifest = {"name": "readme-app", "version": "0.0.0", "private": True, "type": "module"}
        (root / "package.json").write_text(json.dumps(manifest, indent=2))
        (root / "tsconfig.json").write_text(_tsconfig())
        lines = _install_lines()
        assert len(lines) >= 3, lines  # the client's, the backing's, and the dev tools
        for line in lines:
            words = shlex.split(line)
            for i, word in enumerate(words):
                if word.endswith(".tgz"):  # packed here, not in the checkout
                    assert word.startswith(f"{CHECKOUT_PLACEHOLDER}clients/js/"), word
                    words[i] = str(packed / Path(word).name)
            run([*words, "--no-audit", "--no-fund", "--prefer-offline"], NPM_CI_S, root)
        for block in ts_blocks():
            (root / f"{_stem(block)}.ts").write_text(block.text)
        compiled = subprocess.run(
            ["npx", "tsc", "--strict", "-p", "."],
            cwd=root,
            env=env(),
            capture_output=True,
            text=True,
            timeout=NPM_TEST_S,
            check=False,
        )
        assert compiled.returncode == 0, f"tsc --strict:\n{compiled.stdout}\n{compiled.stderr}"
        yield root


def test_the_pages_have_typescript_blocks_and_the_install_lines() -> None:
    """The blocks this file runs are there (a page that lost them would pass vacuously)."""
    names = [block.name for block in ts_blocks()]
    assert sum(name.startswith("clients/js/README.md") for name in names) >= 6, names
    assert sum(name.startswith("clients/js/effect/README.md") for name in names) >= 2, names
    assert any("ioredis" in line for line in _install_lines()) is False


@pytest.mark.timeout(2 * NPM_CI_S + 2 * NPM_TEST_S)
@pytest.mark.parametrize("block", ts_blocks(), ids=lambda block: block.name)
def test_the_block_runs_as_written(app: Path, block: Block, tmp_path: Path) -> None:
    """It compiled (the fixture); it exits 0 against a real server, printing what it says."""
    assert ADDRESS in block.text, f"{block.name} names no {ADDRESS}"
    expected = PRINTS.findall(block.text)
    assert expected, f"{block.name} says nothing it prints"
    with serving(tmp_path / "data", "--fsync", "off") as server:
        script = (app / f"{_stem(block)}.js").read_text()
        running = app / f"{_stem(block)}.run.js"  # in the app: its imports resolve there
        running.write_text(script.replace(ADDRESS, f"127.0.0.1:{server.port}"))
        done = subprocess.run(
            ["node", str(running)],
            cwd=app,
            env=env(),
            capture_output=True,
            text=True,
            timeout=RUN_S,
            check=False,
        )
    assert done.returncode == 0, (
        f"{block.name} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    assert done.stdout.splitlines() == expected, f"{block.name}:\n{done.stderr}"
