"""``python -m bench``: the peer comparison (:mod:`bench.peers.run`), as scripts/bench runs it."""

from __future__ import annotations

import sys

from bench.peers.run import main

if __name__ == "__main__":
    sys.exit(main())
