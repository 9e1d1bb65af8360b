"""Micro-benchmarks: one part of tenure at a time, each a script that prints its numbers.

Unlike :mod:`bench.peers`, these may reach into tenure's internals (the engine,
the codec, the server's metrics, the raw native protocol), since the part they
time has no public face of its own; each module's docstring says what it uses
and why, under *Internals*. Run them from the repository's root:
``python -m bench.micro.NAME`` (or ``python bench/micro/NAME.py``).
"""
