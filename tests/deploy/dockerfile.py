"""A Dockerfile read as its instructions, stage by stage, and what the kit's image
must be (:func:`image_problems`): built by ``deploy/image/build.sh``, run as a user
that is not root, its health asked of ``/readyz``, its data directory a volume."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "Instruction",
    "Stage",
    "copied_sources",
    "healthcheck_command",
    "ignored",
    "image_problems",
    "stages",
]

#: The build script, as the image's build stage has it.
BUILD_SCRIPT: Final = "deploy/image/build.sh"


@dataclass(frozen=True)
class Instruction:
    """One instruction: its keyword (upper case) and its arguments' text."""

    keyword: str
    arguments: str


@dataclass
class Stage:
    """A ``FROM`` and what follows it, up to the next."""

    name: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        """The arguments of every ``keyword`` instruction, in order."""
        return [i.arguments for i in self.instructions if i.keyword == keyword]


def _logical_lines(text: str) -> list[str]:
    """Lines with their continuations joined, comments and blank lines dropped."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def stages(text: str) -> list[Stage]:
    """The stages of a Dockerfile (instructions before the first ``FROM``, the
    ``ARG``s, are left out)."""
    found: list[Stage] = []
    for line in _logical_lines(text):
        keyword, _, arguments = line.partition(" ")
        keyword = keyword.upper()
        arguments = re.sub(r"\s+", " ", arguments.strip())
        if keyword == "FROM":
            words = arguments.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(found))
            found.append(Stage(name))
        elif found:
            found[-1].instructions.append(Instruction(keyword, arguments))
    return found


def _words(arguments: str) -> list[str]:
    """An instruction's arguments as words: its exec form (JSON) or its shell form."""
    if arguments.startswith("["):
        words: list[str] = json.loads(arguments)
        return words
    return shlex.split(arguments)


def _env(stage: Stage) -> dict[str, str]:
    env: dict[str, str] = {}
    for arguments in stage.all("ENV"):
        for word in shlex.split(arguments):
            key, _, value = word.partition("=")
            env[key] = value
    return env


def healthcheck_command(stage: Stage) -> list[str]:
    """The command of the stage's last ``HEALTHCHECK`` (its ``CMD``'s words; [] if none)."""
    checks = stage.all("HEALTHCHECK")
    if not checks:
        return []
    _, cmd, command = checks[-1].partition("CMD ")
    return _words(command) if cmd else []


def image_problems(text: str) -> list[str]:
    """What the Dockerfile ``text`` lacks of the kit's image ([]: nothing)."""
    problems: list[str] = []
    all_stages = stages(text)
    if not all_stages:
        return ["no FROM"]
    final = all_stages[-1]
    # The build script runs in a stage whose result the final stage copies.
    built = [
        stage
        for stage in all_stages
        if any(BUILD_SCRIPT in run for run in stage.all("RUN"))
        and any(BUILD_SCRIPT in copy for copy in stage.all("COPY"))
    ]
    if not built:
        problems.append(f"no stage COPYs and RUNs {BUILD_SCRIPT}")
    elif built[-1] is not final:
        prefix = next(
            run.split(BUILD_SCRIPT, 1)[1].split()[0]
            for run in built[-1].all("RUN")
            if BUILD_SCRIPT in run
        )
        copies = [c for c in final.all("COPY") if c.startswith(f"--from={built[-1].name} ")]
        if not any(c.split()[1] == prefix for c in copies):
            problems.append(f"the final stage does not COPY {prefix} from {built[-1].name}")
    users = final.all("USER")
    user = users[-1].split(":")[0] if users else "root"
    if user in ("root", "0"):
        problems.append(f"the final stage runs as {user}")
    check = " ".join(healthcheck_command(final))
    if "/readyz" not in check:
        problems.append(f"HEALTHCHECK does not ask /readyz: {check!r}")
    data_dir = _env(final).get("TENURE_DATA_DIR")
    if not data_dir:
        problems.append("TENURE_DATA_DIR is not set")
    volumes = [word for volume in final.all("VOLUME") for word in _words(volume)]
    if data_dir and data_dir not in volumes:
        problems.append(f"the data directory {data_dir} is not a VOLUME: {volumes}")
    entry = [word for arguments in final.all("ENTRYPOINT") for word in _words(arguments)]
    if entry[:1] != ["tenure"]:
        problems.append(f"ENTRYPOINT is not tenure: {entry}")
    return problems


def ignored(path: str, dockerignore: str) -> bool:
    """Whether a ``.dockerignore`` (its text) leaves ``path`` (relative to the context)
    out of the build context: its patterns in order, the last that matches ``path`` or
    a directory above it wins, ``!`` puts back (Docker's rules, without ``**`` in the
    middle of a pattern)."""
    patterns = [
        line.strip()
        for line in dockerignore.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    out = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        pattern = pattern.removeprefix("!").strip("/")
        if pattern.startswith("**/"):
            hit = any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts)
        else:
            hit = any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes)
        if hit:
            out = not keep
    return out


def copied_sources(text: str) -> list[str]:
    """What the Dockerfile's ``COPY`` instructions take from the build context (not
    ``--from`` another stage)."""
    sources: list[str] = []
    for stage in stages(text):
        for arguments in stage.all("COPY"):
            words = [word for word in _words(arguments) if not word.startswith("--")]
            if not any(word.startswith("--from=") for word in _words(arguments)):
                sources.extend(words[:-1])
    return sources
