# Convenience targets; scripts/ holds the real commands (CONTRIBUTING.md: the loop).
.PHONY: check fast test lint types
check:
	scripts/test
fast:
	scripts/test --fast
lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .
types:
	.venv/bin/mypy
test:
	.venv/bin/python -m pytest -n 2 --dist loadgroup
