"""Tools of the repository that the tests and ``scripts/`` call; not part of tenure."""
