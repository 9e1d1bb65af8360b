"""The docs as tests: every fenced code block of the pages users read, run as written
or listed with the reason it cannot be (:mod:`tests.docs.blocks` finds them)."""
