"""The emulated clock: the wall clock, with ``speed`` shortening durations instead of moving the clock."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class WallClock(Protocol):
    """Reads the wall clock in Unix epoch seconds: ``time.time``, or a test's own."""

    def __call__(self) -> float: ...


class EmulatedClock:
    """The platform's clock (Unix epoch seconds) and how long its durations really take.

    Running (speed > 0) it reads the wall clock, plus whatever :meth:`advance` added: the timestamps the API
    reports agree with the wall clock, and with those Kubernetes stamps in the twin. Speed shortens durations
    instead (:meth:`duration`): at speed 60 a bring-up of ten emulated minutes takes ten seconds. Speed 0
    freezes the clock (tests move it by hand with :meth:`advance`) and keeps durations nominal.

    Not thread-safe on its own: the platform only touches it under its lock.
    """

    def __init__(self, start: float | None = None, speed: float = 1.0, real: WallClock = time.time) -> None:
        if speed < 0:
            raise ValueError(f"speed must be >= 0; got {speed}")
        self._real = real
        self._speed = speed
        wall = real()
        # A running clock starts at ``start`` only if that is ahead of the wall clock: it never runs behind it.
        self._ahead = 0.0 if start is None else max(0.0, start - wall)
        self._frozen_at: float | None = None if speed > 0 else (wall if start is None else start)

    @property
    def speed(self) -> float:
        return self._speed

    def now(self) -> float:
        """Emulated seconds since the Unix epoch."""
        if self._frozen_at is not None:
            return self._frozen_at
        return self._real() + self._ahead

    def duration(self, nominal_seconds: float) -> float:
        """How long a duration of ``nominal_seconds`` of the platform takes on this clock."""
        return nominal_seconds / self._speed if self._speed > 0 else nominal_seconds

    def set_speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError(f"speed must be >= 0; got {speed}")
        now = self.now()
        if speed == 0:
            self._frozen_at = now
        elif self._frozen_at is not None:
            self._frozen_at = None
            self._ahead = max(0.0, now - self._real())
        self._speed = speed

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"advance_s must be >= 0; got {seconds}")
        if self._frozen_at is not None:
            self._frozen_at += seconds
        else:
            self._ahead += seconds


def nominal(seconds: float) -> float:
    """Durations at their nominal length (the default where no clock is given)."""
    return seconds


def to_datetime(t: float) -> datetime:
    """An emulated timestamp as an aware UTC datetime."""
    return datetime.fromtimestamp(t, UTC)
