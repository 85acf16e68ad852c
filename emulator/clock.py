"""The emulated clock: emulated seconds (Unix epoch based) running at ``speed`` x real time."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime


class EmulatedClock:
    """A clock that can run faster than real time, be frozen (speed 0) and be advanced by hand.

    Not thread-safe on its own: the platform only touches it under its lock.
    """

    def __init__(
        self, start: float | None = None, speed: float = 1.0, real: Callable[[], float] = time.monotonic
    ) -> None:
        if speed < 0:
            raise ValueError(f"speed must be >= 0; got {speed}")
        self._real = real
        self._anchor_real = real()
        self._anchor_emulated = time.time() if start is None else start
        self._speed = speed

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        """Emulated seconds since the Unix epoch."""
        return self._anchor_emulated + (self._real() - self._anchor_real) * self._speed

    def set_speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError(f"speed must be >= 0; got {speed}")
        self._rebase()
        self._speed = speed

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"advance_s must be >= 0; got {seconds}")
        self._rebase()
        self._anchor_emulated += seconds

    def _rebase(self) -> None:
        now_real = self._real()
        self._anchor_emulated += (now_real - self._anchor_real) * self._speed
        self._anchor_real = now_real


def to_datetime(t: float) -> datetime:
    """An emulated timestamp as an aware UTC datetime."""
    return datetime.fromtimestamp(t, UTC)
