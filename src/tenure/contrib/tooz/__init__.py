"""A tooz driver over tenure: ``[coordination] backend_url = tenure://host:6388?node=cinder``.

tooz (OpenStack's coordination library) finds it by the URL's scheme, ``tenure``
or ``tenures`` (its ``tooz.backends`` entry points), once ``tenure[tooz]`` is
installed. Groups with capabilities and join/leave watchers, leader election,
exclusive and shared locks with fencing tokens (:attr:`TenureLock.token`), and
tooz's partitioner, over tenure's groups, elections and readers-writer locks;
members live by tooz's heartbeats (the URL's ``timeout``). docs/integrations.md,
"tooz (OpenStack)", says what maps to what and how it differs from tooz's other
drivers; it passes tooz's own test suite (``tests/contrib/test_tooz_suite.py``).
"""

from __future__ import annotations

from tenure.contrib.tooz._driver import TenureDriver
from tenure.contrib.tooz._lock import TenureLock

__all__ = ["TenureDriver", "TenureLock"]
