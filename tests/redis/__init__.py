"""Real redis-server processes for the tests (:mod:`tests.redis.server`), their fixtures."""
