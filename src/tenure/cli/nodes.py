"""``tenure node create|describe|alter|drop``: a node's life and settings."""

from __future__ import annotations

import dataclasses
from typing import Final

import click

from tenure._core.values import RENAMED_SETTINGS, NodeConfig, NodeDescription
from tenure.cli import _render
from tenure.cli._common import (
    CommandFailedError,
    connect,
    json_option,
    print_json,
    run,
    url_option,
)
from tenure.cli._status import Status
from tenure.errors import PreconditionFailedError

#: Each NodeConfig setting and how its text is read (one of NULLABLE may also be "none").
SETTING_TYPES: Final[dict[str, type]] = {
    field.name: int if isinstance(field.default, int) else float
    for field in dataclasses.fields(NodeConfig)
}
#: The settings whose default is None (default_lease, max_hold, long_hold): "none" (or
#: nothing) sets them back to it.
NULLABLE: Final = frozenset(
    field.name for field in dataclasses.fields(NodeConfig) if field.default is None
)


def parse_settings(pairs: tuple[str, ...]) -> dict[str, object]:
    """``--set key=value`` pairs as NodeConfig changes; a bad one is a usage error.

    A renamed setting's old name (``session_timeout``) is taken as the new one, with a
    deprecation notice on stderr.
    """
    changes: dict[str, object] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise click.BadParameter(f"{pair!r} is not key=value", param_hint="--set")
        if key in RENAMED_SETTINGS:
            # Said on stderr, not through warnings: Python hides a DeprecationWarning
            # raised outside __main__, and this one is for the person typing.
            new = RENAMED_SETTINGS[key]
            click.echo(
                f"DeprecationWarning: --set {key}= is now --set {new}=; {key} will be removed",
                err=True,
            )
            key = new
        if key not in SETTING_TYPES:
            known = ", ".join(SETTING_TYPES)
            raise click.BadParameter(
                f"unknown setting {key!r} (known: {known})", param_hint="--set"
            )
        text = text.strip()
        if key in NULLABLE and text.lower() in ("", "none"):
            changes[key] = None
            continue
        try:
            changes[key] = SETTING_TYPES[key](text)
        except ValueError:
            kind = "an integer" if SETTING_TYPES[key] is int else "a number of seconds"
            raise click.BadParameter(
                f"{key} must be {kind}, got {text!r}", param_hint="--set"
            ) from None
    return changes


def settings_option(function: click.decorators.FC) -> click.decorators.FC:
    """``--set key=value``, repeatable: NodeConfig settings."""
    return click.option(
        "--set",
        "pairs",
        multiple=True,
        metavar="KEY=VALUE",
        help="a node setting (repeatable): " + ", ".join(SETTING_TYPES),
    )(function)


@click.group()
def node() -> None:
    """Create, describe, alter or drop a node (a namespace of semaphores and sessions)."""


@node.command()
@click.argument("name")
@settings_option
@click.option("--exist-ok", is_flag=True, help="an existing node is fine (left unchanged)")
@url_option
def create(name: str, pairs: tuple[str, ...], exist_ok: bool, url: str) -> int:
    """Create node NAME, with default settings unless --set says otherwise."""
    settings = parse_settings(pairs)

    async def main() -> int:
        async with connect(url) as client:
            await client.create_node(name, NodeConfig().replace(**settings), exist_ok=exist_ok)
        click.echo(f"node {name!r} created" if not exist_ok else f"node {name!r} exists")
        return Status.OK

    return run(main())


@node.command(name="describe")
@click.argument("name")
@json_option
@url_option
def describe_node(name: str, as_json: bool, url: str) -> int:
    """Print node NAME's settings, how many sessions and semaphores it has, and the
    deadlocks the store broke on it lately (each an acquire it refused, with the cycle
    that acquire would have closed; a store without deadlock detection has none)."""

    async def main() -> int:
        async with connect(url, node=name) as client:
            found = await client.describe_node(name)
        return _show(found, as_json)

    return run(main())


@node.command()
@click.argument("name")
@settings_option
@json_option
@url_option
def alter(name: str, pairs: tuple[str, ...], as_json: bool, url: str) -> int:
    """Change some settings of node NAME (--set key=value ...); prints the result."""
    settings = parse_settings(pairs)
    if not settings:
        raise click.UsageError("nothing to change: give --set key=value")

    async def main() -> int:
        async with connect(url, node=name) as client:
            found = await client.alter_node(name, **settings)
        return _show(found, as_json)

    return run(main())


@node.command()
@click.argument("name")
@click.option("--force", is_flag=True, help="even with live sessions (they are ended)")
@url_option
def drop(name: str, force: bool, url: str) -> int:
    """Drop node NAME; with live sessions only with --force, which ends them."""

    async def main() -> int:
        async with connect(url, node=name) as client:
            try:
                await client.drop_node(name, force=force)
            except PreconditionFailedError as error:
                # Every backend words the refusal for the API ("use force=True").
                said = str(error).replace("use force=True", "use --force (it ends them)")
                raise CommandFailedError(
                    f"PreconditionFailedError: {said}", Status.FAILED
                ) from None
        click.echo(f"node {name!r} dropped")
        return Status.OK

    return run(main())


def _show(found: NodeDescription, as_json: bool) -> int:
    """Print a node's description (tables, or JSON)."""
    if as_json:
        print_json(_render.node_json(found))
    else:
        out = _render.console()
        for part in _render.node_tables(found):
            out.print(part)
    return Status.OK


def show_node(found: NodeDescription, as_json: bool) -> int:
    """Print a node's description as ``tenure node describe`` does (for ``tenure describe``)."""
    return _show(found, as_json)
