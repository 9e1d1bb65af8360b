"""The wheel's build hook (``hatch_build.py``): compiled where a compiler is, else pure, said.

The decision's parts run here, and one whole build without a compiler (pip, without
build isolation: this venv has the hook's dependencies). The compiled wheels are
built and checked by ``scripts/wheels``, for each CPython it finds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import hatch_build
import pytest

from tenure._build import SAMPLED
from tests.compiled import ROOT, compiled_sources, module_name


def test_a_missing_compiler_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc -O2")
    assert hatch_build.missing_for_compile() == "no C compiler ('/nonexistent/cc' is not on PATH)"


def test_missing_headers_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CC", sys.executable)  # a program that exists: the compiler is found
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    missing = hatch_build.missing_for_compile()
    assert missing is not None
    assert missing.startswith("no Python headers (Python.h is not in")


def test_nothing_is_missing_where_the_compiled_build_was_made() -> None:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc here: scripts/compile could not have run either")
    assert hatch_build.missing_for_compile() is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "auto"), ("", "auto"), ("Always", "always"), (" never ", "never")],
)
def test_the_choice_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: str
) -> None:
    if value is None:
        monkeypatch.delenv(hatch_build.CHOICE_ENV, raising=False)
    else:
        monkeypatch.setenv(hatch_build.CHOICE_ENV, value)
    assert hatch_build.choice() == expected


def test_a_choice_not_offered_is_refused_naming_those_that_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(hatch_build.CHOICE_ENV, "sometimes")
    with pytest.raises(
        ValueError, match="TENURE_COMPILE='sometimes': expected one of auto, always, never"
    ):
        hatch_build.choice()


def test_the_sampled_modules_are_compiled_ones() -> None:
    """What ``tenure --version`` samples must be in the hook's list (or it says pure)."""
    listed = {module_name(source) for source in compiled_sources()}
    assert set(SAMPLED) <= listed


def _tree(tmp_path: Path) -> Path:
    """What a wheel is built from: the tracked files the build reads, and no extension."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "hatch_build.py", "README.md", ".gitignore"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__")
    )
    return tree


def _build(tree: Path, out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-v"]
    command += ["--disable-pip-version-check", "-w", str(out), str(tree)]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )


@pytest.mark.slow
def test_a_wheel_built_without_a_compiler_is_pure_and_says_so(tmp_path: Path) -> None:
    """``auto`` with no compiler: the pure wheel, and why, in the build's output."""
    tree, out = _tree(tmp_path), tmp_path / "dist"
    built = _build(tree, out, CC="/nonexistent/cc", TENURE_COMPILE="auto")
    assert built.returncode == 0, built.stdout + built.stderr
    said = built.stdout + built.stderr
    assert "tenure: building the pure wheel: no C compiler ('/nonexistent/cc'" in said
    (wheel,) = out.glob("tenure-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "tenure/_core/engine.py" in names
    assert not [name for name in names if name.endswith(".so")]

    # Asked to compile, the same machine refuses to build at all.
    refused = _build(tree, tmp_path / "refused", CC="/nonexistent/cc", TENURE_COMPILE="always")
    assert refused.returncode != 0
    assert "TENURE_COMPILE=always, but no C compiler" in refused.stdout + refused.stderr


def _one_module_tree(tmp_path: Path, module: str) -> Path:
    """A tree whose hook compiles ``module`` alone (a compile of seconds, not minutes)."""
    tree = _tree(tmp_path)
    project = tree / "pyproject.toml"
    text = project.read_text()
    start = text.index("include = [", text.index("[tool.hatch.build.targets.wheel.hooks.custom]"))
    end = text.index("]", start)
    project.write_text(f'{text[:start]}include = ["{module}"{text[end:]}')
    return tree


@pytest.mark.slow
def test_a_failing_compiler_names_the_way_out(tmp_path: Path) -> None:
    """Issue 50: a compiler present but failing ended the install with mypyc's output
    alone; the error's last line now says what failed and names TENURE_COMPILE=never."""
    if hatch_build.missing_for_compile() is not None:
        pytest.skip(f"cannot compile here at all: {hatch_build.missing_for_compile()}")
    failing = tmp_path / "failing-cc"
    failing.write_text("#!/bin/sh\necho 'failing-cc: refusing to compile' >&2\nexit 1\n")
    failing.chmod(0o755)
    tree = _one_module_tree(tmp_path, "src/tenure/_core/stamps.py")
    built = _build(tree, tmp_path / "dist", CC=str(failing), TENURE_COMPILE="auto")
    said = built.stdout + built.stderr
    assert built.returncode != 0, said
    assert "tenure: compiling 1 modules with mypyc" in said  # what it compiles, said first
    assert "failing-cc: refusing to compile" in said  # the compiler's own words
    assert "tenure: the compiled build failed with a C compiler present" in said
    assert "TENURE_COMPILE=never pip install tenure" in said
    assert not list((tmp_path / "dist").glob("*.whl"))

    # The way out the error names works on the same machine.
    pure = _build(tree, tmp_path / "pure", CC=str(failing), TENURE_COMPILE="never")
    assert pure.returncode == 0, pure.stdout + pure.stderr
    (wheel,) = (tmp_path / "pure").glob("tenure-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")


def test_the_compile_line_reaches_the_terminal_when_pip_keeps_stderr(tmp_path: Path) -> None:
    """pip keeps a build's stderr at its default verbosity: the line that says what is
    compiled also goes to the controlling terminal (a pty here), and only there once."""
    import pty

    kept = tmp_path / "stderr"  # what pip would keep: a file, not a terminal
    program = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); import hatch_build; "
        "hatch_build.tell_the_terminal('tenure: compiling 3 modules')"
    )
    pid, master = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal; stderr a file
        try:
            fd = os.open(kept, os.O_WRONLY | os.O_CREAT, 0o600)
            os.dup2(fd, 2)
            os.execv(sys.executable, [sys.executable, "-c", program])
        finally:
            os._exit(127)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 1024)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert b"tenure: compiling 3 modules" in seen
    assert kept.read_text() == ""  # (the hook's own print goes to stderr, not this)
