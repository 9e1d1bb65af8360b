"""The install matrix: every install the docs name, in a fresh venv, serving what it claims."""
