"""``deploy/image/Dockerfile`` read as its instructions: it RUNs the build script, runs
as a user that is not root, asks ``/readyz`` for its health and keeps its data
directory in a volume; a copy without any of them is told apart."""

from __future__ import annotations

import pytest

from tests.deploy.dockerfile import (
    copied_sources,
    healthcheck_command,
    ignored,
    image_problems,
    stages,
)
from tests.deploy.kit import DEPLOY

DOCKERFILE = (DEPLOY / "image" / "Dockerfile").read_text()


def test_the_image_is_built_by_the_script_and_runs_as_the_kit_says() -> None:
    assert image_problems(DOCKERFILE) == []
    final = stages(DOCKERFILE)[-1]
    assert final.all("USER") == ["tenure:tenure"]
    assert "/readyz" in " ".join(healthcheck_command(final))


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("USER tenure:tenure", "USER root"), "the final stage runs as root"),
        (("USER tenure:tenure", "# no user"), "the final stage runs as root"),
        (("/readyz", "/healthz"), "HEALTHCHECK does not ask /readyz"),
        (('VOLUME ["/var/lib/tenure"]', 'VOLUME ["/data"]'), "is not a VOLUME"),
        (("RUN /src/deploy/image/build.sh", "RUN pip install"), "RUNs deploy/image/build.sh"),
        (("COPY --from=build /opt/tenure", "COPY --from=build /usr"), "does not COPY /opt/tenure"),
        (('ENTRYPOINT ["tenure"]', 'ENTRYPOINT ["sh"]'), "ENTRYPOINT is not tenure"),
    ],
)
def test_a_copy_that_breaks_a_promise_is_refused(change: tuple[str, str], problem: str) -> None:
    old, new = change
    assert old in DOCKERFILE
    problems = image_problems(DOCKERFILE.replace(old, new))
    assert any(problem in found for found in problems), problems


def test_the_build_context_holds_what_the_image_copies_and_not_the_checkout() -> None:
    # deploy/image/Dockerfile.dockerignore: BuildKit's context filter for this file.
    dockerignore = (DEPLOY / "image" / "Dockerfile.dockerignore").read_text()
    root = DEPLOY.parent
    sources = copied_sources(DOCKERFILE)
    assert sorted(sources) == sorted(
        [
            "pyproject.toml",
            "hatch_build.py",
            "README.md",
            "src/tenure",
            "src/_tenure_console.py",
            "deploy/image/build.sh",
        ]
    )
    for source in sources:
        files = [root / source] if (root / source).is_file() else (root / source).rglob("*.py")
        for path in files:
            relative = path.relative_to(root).as_posix()
            assert not ignored(relative, dockerignore), relative
    for left_out in (".venv/bin/python", ".git/HEAD", "build/mypyc/x.c", "tests/conftest.py"):
        assert ignored(left_out, dockerignore), left_out
    assert ignored("src/tenure/_core/engine.cpython-311-x86_64-linux-gnu.so", dockerignore)
    assert ignored("src/tenure/__pycache__/x.pyc", dockerignore)
    # A filter that drops a source is told.
    assert ignored("src/tenure/_core/engine.py", dockerignore.replace("!src/tenure\n", ""))
