"""Benchmarks of tenure against its peers (dflockd, Redis, etcd); see bench/README.md.

``scripts/bench`` (``python -m bench``) runs them; not part of the test run.
"""
