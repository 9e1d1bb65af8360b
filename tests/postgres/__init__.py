"""Real PostgreSQL servers for the tests (:mod:`tests.postgres.server`), their fixtures."""
