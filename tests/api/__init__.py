"""The repo's side of the conformance kit (``src/tenure/testing/conformance``).

The API suite itself is shipped in :mod:`tenure.testing.conformance`; the repo's run
collects it (``testpaths`` in pyproject.toml) on the harnesses of :mod:`.harness`,
which ``tests/conftest.py`` hands to the kit.
"""
