"""A gunicorn config for tests: each worker says when it is up; no shared control socket.

A SIGTERM that reaches a gunicorn worker forked but not yet through its own signal
setup is lost: the child still runs the master's handler, which queues the signal in
the child's copy of the master. gunicorn then waits its graceful timeout (30 s by
default) before it kills that worker. So a test that stops gunicorn first waits for
every worker's ``post_worker_init`` hook, which runs after that setup.
"""

from __future__ import annotations

import importlib
from pathlib import Path


def write_config(path: Path, ready: Path) -> None:
    """Writes a gunicorn config at ``path`` whose workers each touch a file in ``ready``.

    gunicorn 27's control socket sits at one path in ``$HOME``, shared by every run at
    once: the config turns it off where gunicorn has that setting.
    """
    ready.mkdir(parents=True, exist_ok=True)
    settings = importlib.import_module("gunicorn.config").KNOWN_SETTINGS
    lines = ["import os", ""]
    if any(setting.name == "control_socket_disable" for setting in settings):
        lines.append("control_socket_disable = True")
    lines += [
        "",
        "def post_worker_init(worker):",
        f"    open(os.path.join({str(ready)!r}, str(os.getpid())), 'w').close()",
        "",
    ]
    path.write_text("\n".join(lines))


def workers_up(ready: Path) -> set[int]:
    """The pids of the workers that have said they are up."""
    return {int(entry.name) for entry in ready.iterdir()}
