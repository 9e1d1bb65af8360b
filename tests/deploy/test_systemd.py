"""``deploy/systemd/tenure.service``: ``systemd-analyze verify`` finds nothing to say
of it (its ExecStart pointed at this checkout's ``tenure``: verify needs the binary),
``systemd-analyze security --offline`` rates its exposure low, and it has the
hardening the kit promises; a broken or weakened copy fails the same checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.kit import DEPLOY, tool

UNIT = DEPLOY / "systemd" / "tenure.service"
#: Where the unit expects the install (deploy/image/build.sh /opt/tenure).
INSTALLED = "/opt/tenure/bin/tenure"
#: ``systemd-analyze security``'s exposure (0 to 100: 10 times what it prints) above
#: which the check fails: the unit rates 14 (1.4, "OK"); without its sandboxing, 59.
MAX_EXPOSURE = 20


def runnable_copy(directory: Path, text: str) -> Path:
    """``text`` as ``directory/tenure.service`` with ExecStart this venv's ``tenure``."""
    tenure = Path(sys.executable).parent / "tenure"
    assert tenure.exists(), f"{tenure}: the venv has no tenure command"
    assert INSTALLED in text
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "tenure.service"
    path.write_text(text.replace(INSTALLED, str(tenure)))
    return path


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("systemd-analyze", "systemd"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def verify(path: Path) -> list[str]:
    """What ``systemd-analyze verify`` says of the unit at ``path`` (its exit status
    first when not 0): it exits 0 on a key it ignores, saying so, so any line naming
    the unit counts."""
    verified = analyze("verify", str(path))
    said = [line for line in (verified.stdout + verified.stderr).splitlines() if path.name in line]
    return ([f"exit {verified.returncode}"] if verified.returncode else []) + said


def test_systemd_analyze_verify_finds_nothing(tmp_path: Path) -> None:
    assert verify(runnable_copy(tmp_path, UNIT.read_text())) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("NoNewPrivileges=yes", "NoNewPrivilege=yes"),  # a key it does not know
        ("ProtectSystem=strict", "ProtectSystem=stricter"),  # a value it cannot parse
        ("[Service]", "[Servce]"),  # a section it does not know
        ("ExecStart=", "ExecStart=relative/tenure "),  # not an absolute path
    ],
)
def test_a_broken_copy_fails_verify(tmp_path: Path, old: str, new: str) -> None:
    text = UNIT.read_text()
    assert old in text
    assert verify(runnable_copy(tmp_path, text.replace(old, new, 1))) != []


def test_a_missing_binary_fails_verify(tmp_path: Path) -> None:
    path = tmp_path / "tenure.service"
    path.write_text(UNIT.read_text().replace(INSTALLED, str(tmp_path / "no" / "tenure")))
    assert verify(path)[:1] == ["exit 1"]


def security(path: Path) -> subprocess.CompletedProcess[str]:
    return analyze(
        "security", "--offline=true", f"--threshold={MAX_EXPOSURE}", "--no-pager", str(path)
    )


def test_its_exposure_is_low_and_a_copy_without_the_sandbox_is_not(tmp_path: Path) -> None:
    rated = security(runnable_copy(tmp_path / "unit", UNIT.read_text()))
    assert rated.returncode == 0, rated.stdout[-3000:]
    assert "Overall exposure level for tenure.service: 1." in rated.stdout
    sandbox = ("Protect", "Private", "Restrict", "SystemCall", "CapabilityBoundingSet")
    weakened = "\n".join(
        line for line in UNIT.read_text().splitlines() if not line.startswith(sandbox)
    )
    refused = security(runnable_copy(tmp_path / "weak", weakened))
    assert refused.returncode != 0, refused.stdout[-3000:]


def settings(text: str) -> dict[str, list[str]]:
    """The unit's ``[Service]`` settings, key -> every value given, in order."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            found.setdefault(key, []).append(value)
    return found


def test_it_has_the_hardening_the_kit_promises() -> None:
    service = settings(UNIT.read_text())
    assert service["DynamicUser"] == ["yes"]
    assert "User" not in service
    assert service["ProtectSystem"] == ["strict"]
    assert service["StateDirectory"] == ["tenure"]
    assert "TENURE_DATA_DIR=%S/tenure" in service["Environment"]  # the StateDirectory
    assert service["NoNewPrivileges"] == ["yes"]
    assert service["CapabilityBoundingSet"] == [""]
    assert service["SystemCallFilter"][0] == "@system-service"
    assert service["ExecStart"][0].startswith(f"{INSTALLED} serve ")
