"""When a control plane process that ended is started again: as the kubelet restarts a crashed static pod, at
once and then after a growing back-off, starting the count afresh once a process has run for a while, and
giving up on one that keeps ending (then the cluster has failed, with the process's last log lines)."""

from __future__ import annotations

from dataclasses import dataclass, field

BACKOFF_S = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0)
"""Seconds before the first, second, ... restart in a row; one more quick exit and the twin gives up."""
STEADY_AFTER_S = 60.0
"""A process that ran this long before it ended counts as having run well: its next restart is the first."""


@dataclass
class Restarts:
    """The restarts of one control plane's processes (pure: the caller gives the times)."""

    in_a_row: dict[str, int] = field(default_factory=dict)
    total: dict[str, int] = field(default_factory=dict)
    _due: dict[str, float] = field(default_factory=dict)

    def ended(self, name: str, ran_for_s: float, now: float) -> bool:
        """Record that ``name`` ended after ``ran_for_s`` seconds; ``False`` when it should not be started
        again. Only the first call for one ending counts: later calls while it waits change nothing."""
        if name in self._due:
            return True
        count = 0 if ran_for_s >= STEADY_AFTER_S else self.in_a_row.get(name, 0)
        if count >= len(BACKOFF_S):
            return False
        self.in_a_row[name] = count + 1
        self._due[name] = now + BACKOFF_S[count]
        return True

    def due(self, name: str, now: float) -> bool:
        """Whether the ended process ``name`` may be started now."""
        return name in self._due and now >= self._due[name]

    def started(self, name: str) -> None:
        del self._due[name]
        self.total[name] = self.total.get(name, 0) + 1
