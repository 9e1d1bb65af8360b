"""The postgres:// backend's own tests (tests/postgres starts the servers)."""
