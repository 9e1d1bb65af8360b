"""The fault suite's tests: its scenarios in short mode, its checkers, its mutants and
the bugs it found. The framework they run is :mod:`tools.faults`."""
