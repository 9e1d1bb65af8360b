"""The pages' file blocks (TOML, INI, YAML, JSON) are what the programs that read
them take: each parsed, and loaded by our own loader where the file is ours (the
server's config file and auth file, tooz's URL, a lincheck history, the Kubernetes
schemas). Nothing is started: the unit tier."""

from __future__ import annotations

import argparse
import configparser
import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import kubernetes_validate
import pytest
import trustme
import yaml

from tenure.contrib.tooz._settings import ToozSettings
from tenure.server._config.serve_config import add_arguments
from tenure.server._faces import settings as face_settings
from tenure.server._net.auth import Access, load_tokens
from tenure.server._startup import configure
from tenure.testing import lincheck
from tests.docs.blocks import Block
from tests.docs.roles import Role, blocks_of, ids, page_of

Check = Callable[[Block, Path], None]


def serve_arguments(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed as ``tenure serve`` parses its arguments (SystemExit: refused)."""
    parser = argparse.ArgumentParser(prog="tenure serve")
    add_arguments(parser, face_settings())
    return parser.parse_args(argv)


def auth_file(block: Block, where: Path) -> None:
    """An auth file: loaded by the server's loader, each token as the page says."""
    path = where / "auth.toml"
    path.write_text(block.text)
    tokens = load_tokens(path)
    written = tomllib.loads(block.text)["token"]
    assert [token.name for token in tokens.tokens] == [entry["name"] for entry in written]
    for token, entry in zip(tokens.tokens, written, strict=True):
        assert token.access is Access(entry.get("access", "read-write"))
        assert token.nodes == (tuple(entry["nodes"]) if "nodes" in entry else None)
        if "secret" in entry:
            assert tokens.authenticate(entry["secret"]) == token
        else:
            assert token.digest.hex() == entry["secret_sha256"]
        for name, value in entry.get("quota", {}).items():
            assert getattr(token.quota, name) == value, name


def config_file(block: Block, where: Path) -> None:
    """The server's config file, resolved as ``tenure serve --config FILE`` does: with
    its TLS files (made here) and its auth file (the page's own, below it)."""
    (where / "tls").mkdir()
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1")
    issued.private_key_pem.write_to_path(where / "tls" / "server.key")
    issued.cert_chain_pems[0].write_to_path(where / "tls" / "server.pem")
    page = [b for b in blocks_of(Role.CONFIG) if page_of(b) == page_of(block)]
    auth = next(b for b in page if b.text.startswith("[[token]]"))
    (where / "auth.toml").write_text(auth.text)
    path = where / "tenure.toml"
    path.write_text(block.text)
    config = configure(serve_arguments(["--config", str(path)]), {})
    written = tomllib.loads(block.text)
    assert set(written) <= set(config.sources)
    assert all(config.sources[name] == "file" for name in written)
    assert config.tls_cert == where / "tls" / "server.pem"  # relative to the file
    assert config.auth_file == where / "auth.toml"
    assert (config.port, config.max_connections, config.idle_timeout) == (6388, 10, 30)


def entry_point(block: Block, where: Path) -> None:
    """A pyproject.toml table: the entry-point group tenure.backends looks in."""
    group = tomllib.loads(block.text)["project"]["entry-points"]["tenure.backends"]
    assert group == {"mystore": "mypackage.tenure_backend"}
    source = (Path(__file__).resolve().parents[2] / "src/tenure/backends/__init__.py").read_text()
    assert 'entry_points(group="tenure.backends")' in source


def tooz_config(block: Block, where: Path) -> None:
    """tooz's [coordination] section: each backend_url (the commented ones too) is
    one the driver takes, read as tooz hands it over (its query, one value each)."""
    parser = configparser.ConfigParser()
    parser.read_string(block.text)
    urls = [parser["coordination"]["backend_url"]]
    urls += re.findall(r"^#.*?(tenures?://\S+)", block.text, flags=re.MULTILINE)
    assert len(urls) == 3
    for url in urls:
        parsed = urlsplit(url)
        settings = ToozSettings.of(parsed, dict(parse_qsl(parsed.query)))
        assert settings.node == "cinder"
    assert ToozSettings.of(urlsplit(urls[0]), {"node": "cinder", "timeout": "30"}).timeout == 30


def lincheck_history(block: Block, where: Path) -> None:
    """A history in lincheck's format: each line a JSON object, read by lincheck, and
    linearizable as the register the page says it is."""
    lines = block.text.splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)
    result = lincheck.check(lincheck.read_jsonl(lines), "register")
    assert result.ok, result.explain()


def statefulset(block: Block, where: Path) -> None:
    """Kubernetes objects, valid against the schemas strictly (as deploy/k8s's), whose
    server's arguments ``tenure serve`` parses."""
    documents: list[dict[str, Any]] = [doc for doc in yaml.safe_load_all(block.text) if doc]
    assert [doc["kind"] for doc in documents] == ["StatefulSet", "Service", "Service"]
    for document in documents:
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(), strict=True)
    [container] = documents[0]["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == "serve"
    serve_arguments(container["args"][1:])


#: Each file block, by its page and how it begins, and how it is checked.
CHECKS: dict[tuple[str, str], Check] = {
    ("docs/backends.md", '[project.entry-points."tenure.backends"]'): entry_point,
    ("docs/dflockd.md", "[[token]]"): auth_file,
    ("docs/integrations.md", "[coordination]"): tooz_config,
    ("docs/operations.md", 'host = "0.0.0.0"'): config_file,
    ("docs/operations.md", '[[token]]\nname = "deployer"'): auth_file,
    ("docs/operations.md", '[[token]]\nname = "batch"'): auth_file,
    ("docs/operations.md", "apiVersion: apps/v1"): statefulset,
    ("docs/testing.md", '{"initial": 1}'): lincheck_history,
}


def check_of(block: Block) -> Check:
    """The check of ``block`` (KeyError: none)."""
    [check] = [
        check
        for (page, begins), check in CHECKS.items()
        if page == page_of(block) and block.text.startswith(begins)
    ]
    return check


def test_every_file_block_has_one_check_and_every_check_a_block() -> None:
    found = [
        (page, begins)
        for block in blocks_of(Role.CONFIG)
        for (page, begins) in CHECKS
        if page == page_of(block) and block.text.startswith(begins)
    ]
    assert sorted(found) == sorted(CHECKS)
    assert len(found) == len(blocks_of(Role.CONFIG))


@pytest.mark.parametrize("block", blocks_of(Role.CONFIG), ids=ids(blocks_of(Role.CONFIG)))
def test_a_file_block_is_what_its_program_reads(block: Block, tmp_path: Path) -> None:
    check_of(block)(block, tmp_path)
