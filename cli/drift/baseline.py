"""Whether a resource's state still says what the last deployment wrote, from the stack's history. Pure.

Telling drift from a change pending in the code needs the value the last ``pulumi up`` deployed. The state
holds it, unless a ``pulumi refresh`` rewrote the resource since: a refresh writes the live inputs into
the state, which then vouches for a change made outside the code. The engine stamps every resource with
the time it last ``modified`` it (an update, or a refresh that saw a change); the history says what ran
when, and whether each refresh rewrote inputs (it counts such a resource as updated or deleted; a
refresh that only saw new outputs, a preemption say, counts it as unchanged).

A resource's state is trusted when the operation that last modified it was an update, or refreshes that
rewrote no inputs back to an update. Anything else, including a time no history entry explains, is not
trusted: a difference on that resource is then drift, never pending.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

# History times have whole seconds (the CLI prints them so); the engine's resource times do not.
_RESOLUTION = timedelta(seconds=1)
_DEPLOYING_KINDS = frozenset({"update"})


@dataclass(frozen=True)
class HistoryEntry:
    """One operation of the stack's history: its kind, when it ran, whether it changed any resource."""

    kind: str
    start: datetime
    end: datetime | None
    changed: bool

    def covers(self, moment: datetime) -> bool:
        end = self.end if self.end is not None else self.start
        return self.start <= moment < end + _RESOLUTION


@dataclass(frozen=True)
class Baseline:
    """The history, newest first, as far back as the oldest resource's last modification (or all of it)."""

    entries: tuple[HistoryEntry, ...] = ()

    def trusts(self, modified: datetime | None) -> bool:
        if modified is None:
            return False
        covering = [i for i, e in enumerate(self.entries) if e.covers(modified)]
        if not covering:
            return False
        # Whole-second history times can put a moment in two operations (one ending, the next starting
        # within the same second): take the one that does not vouch for the deployment.
        writer = next((i for i in covering if self.entries[i].kind not in _DEPLOYING_KINDS), covering[0])
        for entry in self.entries[writer:]:
            if entry.kind in _DEPLOYING_KINDS:
                return True
            # A refresh that changed nothing the history counts saw new outputs only: the inputs are
            # those of the operation before it.
            if entry.changed or entry.kind != "refresh":
                return False
        return False


def reaches_back(entries: Sequence[HistoryEntry], oldest_modified: datetime | None) -> bool:
    """Whether ``entries`` (newest first) hold an update from before every resource's last change.

    Then every resource's walk back from its last modification ends within ``entries``.
    """
    return any(
        e.kind in _DEPLOYING_KINDS and (oldest_modified is None or e.start <= oldest_modified)
        for e in entries
    )
