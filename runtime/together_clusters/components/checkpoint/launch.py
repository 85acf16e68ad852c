"""Run a training launcher (torchrun and the like) so that a preemption always ends in exit 143.

``python -m together_clusters.components.checkpoint.launch -- torchrun --nproc-per-node 8 train.py``

The Jobs' pod failure policy ignores exit code 143 of the main container: that is how a pod deleted
without a DisruptionTarget condition tells the Job controller "preempted, not broken". torchrun exits 1
when it is sent SIGTERM (its agent raises SignalException), which would count against backoffLimit.
This wrapper forwards SIGTERM to the launcher and, once it has been told to stop, reports 143 whatever
the launcher returns, 0 included: a launcher whose training loop stopped because of the SIGTERM may exit 0,
and the Job would count that attempt as Succeeded and end the run unfinished (a run that really finished
within the grace period is run once more, resumes from its last checkpoint and ends again). Without
SIGTERM the launcher's own exit status is passed through, so real crashes still count and non-retriable
exit codes still fail.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Sequence
from types import FrameType

from .contract import PREEMPTED_EXIT_CODE

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def exit_status(returncode: int, told_to_stop: bool) -> int:
    """The container's exit code for a launcher that ended with ``returncode`` (negative: killed by signal)."""
    if told_to_stop:
        return PREEMPTED_EXIT_CODE
    return 128 - returncode if returncode < 0 else returncode


def run(command: Sequence[str]) -> int:
    """Run ``command``, forwarding SIGTERM/SIGINT to it; return the exit code the container should end with."""
    if not command:
        raise SystemExit(
            "usage: python -m together_clusters.components.checkpoint.launch -- COMMAND [ARGS...]"
        )
    told_to_stop = False
    child = subprocess.Popen(list(command))

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal told_to_stop
        told_to_stop = True
        child.send_signal(signum)

    for signum in FORWARDED_SIGNALS:
        signal.signal(signum, forward)
    return exit_status(child.wait(), told_to_stop)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
