"""``deploy/compose.yaml``: valid for Compose (Debian's ``docker-compose`` checks it
with ``config -q``, no Docker engine needed) and what the kit promises: three etcd
members, three tenure members of one cluster over them, and Prometheus with the
alert rules; a broken copy fails the same check."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.kit import DEPLOY, tool

COMPOSE = DEPLOY / "compose.yaml"


def compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    """``docker-compose config -q`` of ``path``, resolved from ``deploy/`` (its
    relative paths: the build context, Prometheus's files)."""
    return subprocess.run(
        [
            tool("docker-compose", "docker-compose"),
            "--project-directory",
            str(DEPLOY),
            "-f",
            str(path),
            "config",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def resolved(path: Path) -> dict[str, Any]:
    """The file as Compose resolves it (anchors and merges applied)."""
    config = subprocess.run(
        [
            tool("docker-compose", "docker-compose"),
            "--project-directory",
            str(DEPLOY),
            "-f",
            str(path),
            "config",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded: dict[str, Any] = yaml.safe_load(config.stdout)
    return loaded


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """A service's volumes, target -> source (Compose v1 writes them short:
    ``SOURCE:TARGET[:MODE]``; the long form is a mapping)."""
    found = {}
    for volume in service.get("volumes", ()):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume["source"], volume["target"]
        found[target] = source
    return found


def test_compose_accepts_the_file() -> None:
    checked = compose_config(COMPOSE)
    assert checked.returncode == 0, checked.stderr


def test_three_etcd_members_three_tenure_members_and_prometheus_with_the_rules() -> None:
    services = resolved(COMPOSE)["services"]
    etcd = sorted(name for name in services if name.startswith("etcd-"))
    tenure = sorted(name for name in services if name.startswith("tenure-"))
    assert etcd == ["etcd-0", "etcd-1", "etcd-2"]
    assert tenure == ["tenure-0", "tenure-1", "tenure-2"]
    peers = services["etcd-0"]["environment"]["ETCD_INITIAL_CLUSTER"].split(",")
    assert sorted(peer.split("=")[0] for peer in peers) == etcd
    urls = {services[name]["environment"]["TENURE_CLUSTER"] for name in tenure}
    assert urls == {"etcd://etcd-0:2379,etcd-1:2379,etcd-2:2379/compose"}
    for name in tenure:
        environment = services[name]["environment"]
        assert environment["TENURE_DATA_DIR"] == "/var/lib/tenure"
        assert mounts(services[name])["/var/lib/tenure"] == name  # a named volume
        assert services[name]["build"]["dockerfile"] == "deploy/image/Dockerfile"
    files = mounts(services["prometheus"])
    assert Path(files["/etc/prometheus/alerts.yaml"]) == DEPLOY / "prometheus" / "alerts.yaml"
    scrape = yaml.safe_load(Path(files["/etc/prometheus/prometheus.yml"]).read_text())
    assert scrape["rule_files"] == ["/etc/prometheus/alerts.yaml"]
    (job,) = scrape["scrape_configs"]
    assert job["job_name"] == "tenure"  # what the rules select
    assert job["static_configs"][0]["targets"] == [f"{name}:8080" for name in tenure]


def test_a_broken_copy_is_refused(tmp_path: Path) -> None:
    text = COMPOSE.read_text()
    for old, new in (
        ("    hostname: tenure-1", "    hostnme: tenure-1"),  # no such option
        ("{condition: service_healthy}", "{condition: healthy}"),  # no such condition
        ("services:", "service:"),  # no services at all
    ):
        assert old in text
        (tmp_path / "compose.yaml").write_text(text.replace(old, new))
        refused = compose_config(tmp_path / "compose.yaml")
        assert refused.returncode != 0, (old, new)
