"""``python -m bench.scale``: the scale run (:mod:`bench.scale.run`); scripts/bench --scale."""

from __future__ import annotations

import sys

from bench.scale.run import main

if __name__ == "__main__":
    sys.exit(main())
