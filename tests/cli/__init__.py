"""Tests of the ``tenure`` command: the installed executable, against real servers."""
