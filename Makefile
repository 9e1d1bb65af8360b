# Convenience targets; scripts/ holds the real commands.
.PHONY: check test lint types
check:
	scripts/test
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
types:
	.venv/bin/mypy
test:
	.venv/bin/python -m pytest
