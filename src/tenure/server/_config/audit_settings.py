"""The settings of the audit log (``--audit-log PATH|-``, issue 50).

Rows of the settings table (:data:`tenure.server._config.settings.SETTINGS` includes
them). What the log holds, its rotation and what happens when its disk is slow are
:mod:`tenure.server._audit`'s; docs/operations.md ("Audit log") has the line format.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from tenure.server._config.setting import Setting, in_range

__all__ = [
    "AUDIT_SETTINGS",
    "DEFAULT_AUDIT_LOG_KEEP",
    "DEFAULT_AUDIT_LOG_MAX_BYTES",
    "DEFAULT_AUDIT_LOG_QUEUE",
]

#: ``--audit-log-max-bytes``: a file is rotated past this size (100 MiB).
DEFAULT_AUDIT_LOG_MAX_BYTES: Final = 100 * 1024 * 1024
#: ``--audit-log-keep``: the rotated files kept (``PATH.1`` to ``PATH.5``).
DEFAULT_AUDIT_LOG_KEEP: Final = 5
#: ``--audit-log-queue``: lines waiting for the writer thread, at most; more are dropped
#: (a line is a few hundred bytes: about 2.5 MB at most).
DEFAULT_AUDIT_LOG_QUEUE: Final = 10_000


def check_audit_path(value: str) -> None:
    """A path whose directory exists and that is no directory itself (or ``-``, or empty).

    Raises:
        ValueError: why not.
    """
    if not value or value == "-":
        return
    path = Path(value)
    if path.is_dir():
        raise ValueError("is a directory: name a file in it")
    if not path.parent.is_dir():
        raise ValueError(f"its directory {str(path.parent)!r} does not exist")


AUDIT_SETTINGS: Final = (
    Setting(
        "audit_log",
        str,
        "",
        "PATH",
        "append a JSON line to this file for every administrative act and refusal (node "
        "create, alter, drop; kill-session; failed logins; quota and budget refusals; "
        "reload; backup): time, token name, address, what, outcome, never a secret; '-': "
        "standard output; empty: no audit log (default: empty)",
        check_audit_path,
        file_path=True,
    ),
    Setting(
        "audit_log_max_bytes",
        int,
        DEFAULT_AUDIT_LOG_MAX_BYTES,
        "BYTES",
        "rotate the audit log when a line would take it past this size: PATH becomes "
        "PATH.1, PATH.1 PATH.2, ...; 0: never (default: %(default)s)",
        in_range(0),
    ),
    Setting(
        "audit_log_keep",
        int,
        DEFAULT_AUDIT_LOG_KEEP,
        "N",
        "rotated audit logs kept (PATH.1 to PATH.N, the oldest removed); 0: none, a full "
        "file is begun afresh, 0 to 1000 (default: %(default)s)",
        in_range(0, 1000),
    ),
    Setting(
        "audit_log_queue",
        int,
        DEFAULT_AUDIT_LOG_QUEUE,
        "N",
        "audit lines waiting for the disk, at most: the server never waits on the audit "
        "log, a line past this is dropped and counted in "
        "tenure_audit_lines_dropped_total, 1 to 10000000 (default: %(default)s)",
        in_range(1, 10_000_000),
    ),
)
