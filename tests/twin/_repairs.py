"""The emulator's remediation timings for a module of repair tests, put back as they were afterwards (the
package's twin is shared by every module)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from together_clusters.emulator.admin_client import AdminClient


@contextmanager
def remediation_timings(
    admin: AdminClient, timings: dict[str, Any], speed: float | None = None
) -> Iterator[None]:
    """``timings`` (nominal seconds per state, see ``AdminClient.settings``) and, if given, the clock's
    ``speed``, for the ``with`` block."""
    before = admin.settings()["remediation_timings"]
    speed_before = admin.clock()["speed"]
    if speed is not None:
        admin.set_speed(speed)
    admin.settings(remediation_timings=timings)
    try:
        yield
    finally:
        admin.settings(remediation_timings=before)
        if speed is not None:
            admin.set_speed(speed_before)
