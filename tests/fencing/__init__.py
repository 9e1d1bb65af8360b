"""tenure.fencing: each guard against a real resource (PostgreSQL, Redis, a file)."""
