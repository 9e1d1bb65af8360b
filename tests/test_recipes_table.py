"""tools/recipes_table.py: docs/recipes.md's table by backend, from a run's JUnit XML."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import recipes_table as rt

ROOT = Path(__file__).resolve().parent.parent
KIT = "src.tenure.testing.conformance"

JUNIT = f"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="{KIT}.test_lock_all" name="test_a[memory]" time="0.1"/>
<testcase classname="{KIT}.test_lock_all" name="test_b[memory]" time="0.1"/>
<testcase classname="{KIT}.test_lock_all" name="test_a[etcd]" time="0.1">
  <skipped type="pytest.skip" message="etcd backend does not declare the capability all_or_none"/>
</testcase>
<testcase classname="{KIT}.test_lock_all" name="test_refused[etcd]" time="0.1"/>
<testcase classname="{KIT}.test_rwlock" name="test_a[redis]" time="0.1">
  <failure message="assert 1 == 2"/>
</testcase>
<testcase classname="{KIT}.test_rwlock" name="test_b[redis]" time="0.1"/>
<testcase classname="{KIT}.test_rwlock" name="test_c[tenure-cluster]" time="0.1">
  <skipped message="the kit cannot fake the tenure-cluster backend's time (memory:// only)"/>
</testcase>
<testcase classname="{KIT}.test_rwlock" name="test_d[tenure-cluster]" time="0.1"/>
<testcase classname="{KIT}.test_mutex" name="test_x[memory]" time="0.1"/>
<testcase classname="tests.core.test_engine" name="test_y" time="0.1"/>
<testcase classname="tests.sync.test_lock_all" name="test_z[memory]" time="0.1"/>
<testcase classname="tenure.testing.conformance.test_rwlock" name="test_e[redis]" time="0.1"/>
</testsuite></testsuites>
"""


@pytest.fixture
def junit(tmp_path: Path) -> Path:
    path = tmp_path / "run.xml"
    path.write_text(JUNIT)
    return path


def test_each_module_and_backend_gets_what_its_tests_did(junit: Path) -> None:
    found = rt.cells(junit)
    assert found["test_lock_all", "memory"].text() == "yes (2 passed)"
    assert found["test_lock_all", "etcd"].text() == "no: lacks all_or_none (1 skipped, 1 passed)"
    # (test_e: the kit run from an installed package counts too)
    assert found["test_rwlock", "redis"].text() == "**fails** (1 of 3 tests)"
    # A skip for another reason (the kit's fake clock) is not a lack of the backend's.
    assert found["test_rwlock", "tenure-cluster"].text() == "yes (1 passed)"
    assert ("test_mutex", "memory") not in found  # not a recipe's module
    # tests/sync/test_lock_all.py shares the kit module's name, not its results (above).
    assert rt.Cell().text() == "not run"


def test_the_table_has_every_recipe_and_backend_in_order(junit: Path) -> None:
    made = rt.table(rt.cells(junit))
    lines = made.splitlines()
    assert lines[0] == rt.BEGIN
    assert lines[-1] == rt.END
    assert lines[2] == "| recipe | conformance module | " + " | ".join(rt.BACKENDS) + " |"
    rows = [line for line in lines[4:] if line.startswith("| ")]
    assert [row.split(" | ")[1] for row in rows] == [f"`{m}.py`" for m, _ in rt.RECIPES]


def test_check_fails_on_a_stale_table_and_a_rewrite_fixes_it(
    junit: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "recipes.md"
    doc.write_text(f"# Recipes\n\n{rt.BEGIN}\nold\n{rt.END}\n\nmore prose\n")
    assert rt.main(["--junit", str(junit), "--doc", str(doc), "--check"]) == 1
    assert "differs from what this run" in capsys.readouterr().err
    assert rt.main(["--junit", str(junit), "--doc", str(doc)]) == 0
    assert rt.main(["--junit", str(junit), "--doc", str(doc), "--check"]) == 0
    text = doc.read_text()
    assert text.startswith("# Recipes\n\n")
    assert text.endswith("\n\nmore prose\n")
    with pytest.raises(ValueError, match="markers"):
        rt.rewritten("no markers here", "table")


def test_the_doc_has_the_table_and_every_recipe_module_exists() -> None:
    doc = (ROOT / "docs" / "recipes.md").read_text()
    assert rt.BEGIN in doc
    assert rt.END in doc
    for module, _ in rt.RECIPES:
        assert (ROOT / "src/tenure/testing/conformance" / f"{module}.py").is_file()
        assert f"`{module}.py`" in doc
