"""A SessionListener for the backend tests that keeps what it hears."""

from __future__ import annotations

from tenure.errors import LostError


class Heard:
    """A SessionListener that keeps what it hears."""

    def __init__(self) -> None:
        self.lost: list[LostError] = []
        self.leases: list[tuple[str, int, LostError]] = []

    def session_lost(self, error: LostError) -> None:
        self.lost.append(error)

    def lease_lost(self, name: str, token: int, error: LostError) -> None:
        self.leases.append((name, token, error))
