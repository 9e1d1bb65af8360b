"""``python -m tenure.testing.sim``: :mod:`tenure.testing.sim._cli`."""

import sys

from tenure.testing.sim._cli import main

if __name__ == "__main__":  # (imported, as an install's check of its modules does: nothing)
    sys.exit(main())
