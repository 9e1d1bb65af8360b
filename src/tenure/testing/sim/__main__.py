"""``python -m tenure.testing.sim``: :mod:`tenure.testing.sim._cli`."""

import sys

from tenure.testing.sim._cli import main

sys.exit(main())
