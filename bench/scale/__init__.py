"""How tenure's cost grows: ``scripts/bench --scale [--quick]`` writes docs/scale.md.

:mod:`bench.scale.run` orchestrates; :mod:`bench.scale.dimensions` measures one size of
a dimension on a fresh server (:mod:`bench.scale.stage`) loaded by client processes
(:mod:`bench.scale.load`, over :mod:`bench.scale.wire`) while a probe
(:mod:`bench.scale.probe`) times its own requests; :mod:`bench.scale.shards` measures
``tenure serve --shards N``; :mod:`bench.scale.report` and
:mod:`bench.scale.projection` write the page.
"""
