"""What the benchmarks are run and reported with.

Servers on loopback (:mod:`~bench.tools.systems`), CPU readings
(:mod:`~bench.tools.cpu`), worker processes (:mod:`~bench.tools.workers`),
measurements and their JSON (:mod:`~bench.tools.results`), docs/benchmarks.md
(:mod:`~bench.tools.report`, :mod:`~bench.tools.plots`), and the dashboard's
picture for the docs (:mod:`~bench.tools.dashboard_screenshot`).
"""
