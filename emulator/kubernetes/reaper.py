"""Kills the local runtime's process groups once the emulator is gone, however it ended.

``python -m together_clusters.emulator.kubernetes.reaper`` reads lines from stdin, a pipe only the emulator
holds open: ``<pgid>`` adds a process group, ``-<pgid>`` forgets one (its pod ended). At end of input (the
emulator stopped, or was killed outright) it sends SIGKILL to every group still listed. A parent-death signal
alone would reach only the pod's first process, not what it started (a launcher's children).
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> int:
    groups: set[int] = set()
    for line in sys.stdin:
        try:
            number = int(line)
        except ValueError:
            continue
        if number > 0:
            groups.add(number)
        else:
            groups.discard(-number)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
