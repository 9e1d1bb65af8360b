"""limits' storage on tenure: rate limits shared by every process of a service.

``pip install 'tenure[limits]'``, then import this module once (it registers the
URL schemes with limits) and give limits, flask-limiter or slowapi a tenure URL::

    import tenure.contrib.limits  # noqa: F401  (registers tenure:// with limits)
    from flask_limiter import Limiter

    limiter = Limiter(get_remote_address, app=app, storage_uri="tenure://127.0.0.1:6388")

``tenure://`` and ``tenures://`` are :class:`TenureStorage`; ``async+tenure://`` and
``async+tenures://`` (``limits.aio``) are :class:`AsyncTenureStorage`. Both keep all
three of limits' strategies (fixed window, moving window, sliding window counter),
exactly as limits defines them, in records changed by compare-and-set, each in an
ephemeral semaphore that the store deletes when its window is over
(docs/integrations.md, "limits").
"""

from __future__ import annotations

from tenure.contrib.limits._names import DEFAULT_NODE, DEFAULT_PREFIX
from tenure.contrib.limits._storage import AsyncTenureStorage, TenureStorage

__all__ = ["DEFAULT_NODE", "DEFAULT_PREFIX", "AsyncTenureStorage", "TenureStorage"]
