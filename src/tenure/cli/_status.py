"""The exit statuses of ``tenure``; free of click (``serve`` and ``migrate`` run without it)."""

from __future__ import annotations

import enum


class Status(enum.IntEnum):
    """The exit statuses of ``tenure`` (like flock(1)'s: a child's own status passes through)."""

    #: Done; for ``lock`` and ``elect``, the command exited 0.
    OK = 0
    #: ``lock``/``elect``: busy with ``--try``, or not acquired within ``--timeout``;
    #: ``leader``: nobody leads; ``cluster status``: no door that answered leads.
    BUSY = 1
    #: Bad usage: an unknown option, a missing or malformed argument, a value the
    #: backend refused as invalid.
    USAGE = 2
    #: The backend refused or failed: not found, already exists, permission denied,
    #: unreachable... (the message says which); also a missing ``cli`` extra.
    FAILED = 3
    #: ``lock``/``elect``: the lock or leadership was lost while the command ran; the
    #: command was sent SIGTERM (and SIGKILL after ``--grace``).
    LOST = 4
    #: The command was found but could not be executed (as in a shell).
    CANNOT_EXECUTE = 126
    #: The command was not found (as in a shell).
    COMMAND_NOT_FOUND = 127
    #: 128 + N: the command (or ``tenure`` itself, while waiting) was ended by signal N.
    SIGNAL_BASE = 128
