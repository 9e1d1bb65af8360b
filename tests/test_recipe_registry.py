"""The recipe registry (tenure.client._recipes) matches the code: one line per recipe.

Adding a recipe is its file, its sync twin and one registry line; the typed makers
and the exports stay explicit (what an IDE reads), so this test checks that each line
has them, and that no recipe maker of a session lacks its line.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import tenure
import tenure.client
import tenure.sync
from tenure.client._recipes import RECIPES, Recipe

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "src" / "tenure" / "testing" / "conformance"
#: The public methods of a session that make no recipe (each says why).
NOT_RECIPES = {
    "acquire": "the primitive every recipe is made with",
    "adopt": "takes over a lease another session handed off (a lease's, not a recipe)",
    "check": "raises the loss error if the session was lost",
    "close": "ends the session",
    "keep_lease": "the sync session keeps a sync recipe's lease as its async lease's twin",
    "leases": "what the session holds",
    "on_lost": "calls back when the session is lost",
    "renew": "renews the session's ttl",
    "ticket": "what resuming the session takes",
}


def _public_methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, callable) if not name.startswith("_")}


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda recipe: recipe.kit)
def test_each_line_names_what_the_code_has(recipe: Recipe) -> None:
    owner, method = recipe.maker.split(".")
    for face in (tenure.client, tenure.sync):
        assert callable(getattr(getattr(face, owner), method, None)), (face, recipe.maker)
    if recipe.cls is not None:
        assert getattr(tenure, recipe.cls) is getattr(tenure.client, recipe.cls)
        assert recipe.cls in tenure.client.__all__
        assert recipe.cls in tenure.sync.__all__
        assert inspect.isclass(getattr(tenure.sync, recipe.cls))
        made = inspect.signature(getattr(getattr(tenure.client, owner), method)).return_annotation
        assert re.search(rf"\b{recipe.cls}\b", str(made)), (recipe.maker, made)
    assert (KIT / f"{recipe.kit}.py").is_file(), recipe.kit


def test_every_recipe_maker_of_a_session_has_its_line() -> None:
    makers = {
        recipe.maker.split(".")[1] for recipe in RECIPES if recipe.maker.startswith("Session.")
    }
    for face in (tenure.client, tenure.sync):
        unlisted = _public_methods(face.Session) - makers - set(NOT_RECIPES)
        assert not unlisted, (
            f"{face.__name__}.Session makes recipes with no registry line: {unlisted}"
        )
    assert not set(NOT_RECIPES) & makers


def test_the_docs_show_each_recipe_with_a_row() -> None:
    doc = (ROOT / "docs" / "recipes.md").read_text()
    for recipe in RECIPES:
        if recipe.row is not None:
            assert f"| {recipe.row} | `{recipe.kit}.py` |" in doc, recipe.row
            assert f"\n| {recipe.row.split(',')[0]} | " in doc, recipe.row  # the API table
