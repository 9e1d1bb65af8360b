"""The hosts the dashboard answers to (``--http-allowed-hosts``): parsing and checks.

Plain functions over the configuration, no aiohttp: the setting's check runs where the
configuration is read; :mod:`tenure.server._http.host_check` applies them per request.
"""

from __future__ import annotations

from typing import Final

__all__ = ["LOOPBACK", "allowed_hosts", "check_hosts_setting", "host_of"]

#: Always allowed: a browser on the server's own machine.
LOOPBACK: Final = frozenset({"localhost", "127.0.0.1", "::1"})
#: Listening on one of these names no host: it adds nothing to the allowed ones.
_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::"})


def check_hosts_setting(value: str) -> None:
    """``--http-allowed-hosts``: comma-separated host names or addresses, or ``*``.

    Raises:
        ValueError: an entry has a scheme, a path, a port or white space.
    """
    for entry in value.split(","):
        name = entry.strip()
        if not name:
            continue
        bracketed = f"[{name}]" if name.count(":") > 1 and not name.startswith("[") else name
        if name != "*" and host_of(bracketed) != _normal(name):
            raise ValueError(
                f"{entry.strip()!r} is not a host name or address (no scheme, port or path)"
            )


def allowed_hosts(setting: str, bound: str) -> frozenset[str] | None:
    """The hosts a dashboard request may name (lower case); None: any (``*``).

    ``setting`` is ``--http-allowed-hosts``; ``bound`` the address the endpoint
    listens on (``--http-host``, else ``--host``).
    """
    given = {_normal(name) for name in setting.split(",")}
    if "*" in given:
        return None
    hosts = set(LOOPBACK) | (given - {""})
    bound = _normal(bound)
    if bound not in _WILDCARDS:
        hosts.add(bound)
    return frozenset(hosts)


def _normal(name: str) -> str:
    """A host as the checks compare it: lower case, no brackets, no final dot."""
    return name.strip().lower().strip("[]").rstrip(".")


def host_of(authority: str) -> str | None:
    """The host of ``host[:port]`` or ``[v6][:port]``, lower case; None if malformed."""
    authority = authority.strip()
    if authority.startswith("["):
        end = authority.find("]")
        rest = authority[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return authority[1:end].lower() or None
    host, colon, port = authority.partition(":")
    if ":" in port or (colon and not port.isdigit()):
        return None
    host = host.lower().rstrip(".")
    if not host or any(ch.isspace() or ch in "/@?#" for ch in host):
        return None
    return host
