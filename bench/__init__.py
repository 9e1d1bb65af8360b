"""Benchmarks of tenure, by purpose; see bench/README.md. Never part of the test run.

* :mod:`bench.peers`: tenure against what users would pick instead (redis-py's
  Lock, etcd's lock API, PostgreSQL advisory locks, dflockd, YDB's SDK), through
  tenure's public API only (``tests/bench`` enforces it); ``scripts/bench``
  (``python -m bench``) runs it and writes docs/benchmarks.md.
* :mod:`bench.micro`: one part of tenure at a time (the codec, the engine, the
  server's request path, the metrics, instruction counts), internals allowed.
* :mod:`bench.tools`: what they are run and reported with (servers, CPU readings,
  worker processes, results, the report and its plots).
"""
