"""Section 8's move back: how soon a ``PREEMPTIBLE_FIRST`` run that fell back to the standard node runs on a
preemptible node again once capacity returns, against the issue's goal: one descheduling interval plus the grace
the pod uses.

The run, its program and the timing are the twin test's (tests/twin/move_back.py, used by
tests/twin/test_engine_move_back.py): a real ``pulumi up`` on a bare twin at clock speed 60 that installs JobSet
and the descheduler (interval 5 s, pods movable from 15 s old), a BatchJob whose pod is a real local process on
the checkpoint runtime, the region's capacity at 0 so that it falls back, then given back with the emulator's
admin ``set_capacity``. The clock starts when the refilled preemptible node is Ready: before that is the
platform's provisioning, which no descheduler can shorten (reported beside the figure). Each further move is
prepared as the test does: the moved-back pod's node preempted with no capacity to refill, its replacement on
the standard node old enough to move. The goal is a bound ("within"), and the wait for the descheduler's next
look depends on where in its interval the node arrives: each refill is delayed a further 1/MOVES of an interval,
so that the moves meet the loop at different points, and the figure is the slowest move's.
"""

from __future__ import annotations

import statistics

from tests.twin.move_back import (
    DESCHEDULING_INTERVAL,
    GRACE,
    Disruptions,
    MoveBack,
    fall_back,
    fallback_run,
    fallen_back,
    move_back_after_refill,
)

from .context import Context
from .figures import Figure, Goal

NAME = "refilled node Ready to the moved-back pod Running, over one descheduling interval + the grace it used"
GOAL = Goal("<=", 1.0)
MOVES = 4
"""Moves back timed in one run (each about 25 s: a fall back, the wait until the pod may move, the refill)."""


def _moves(ctx: Context) -> list[MoveBack]:
    timed: list[MoveBack] = []
    with fallback_run(ctx.workdir / "move-back", "bench-move-back") as run, Disruptions(run.api) as seen:
        ctx.progress("move back: the stack is up, waiting for its run on the standard node")
        pod = fallen_back(run)
        been: set[str] = set()
        while True:
            phase = len(timed) * DESCHEDULING_INTERVAL / MOVES
            move = move_back_after_refill(run, seen, pod, been, delay=phase)
            timed.append(move)
            ctx.progress(
                f"move back {len(timed)}/{MOVES}: {move.total:.1f} s from the refill ({move.parts()})"
            )
            been |= {pod.metadata.uid, move.replacement.metadata.uid}
            if len(timed) == MOVES:
                return timed
            pod = fall_back(run.core, run.admin, run.cluster_id, been)


def run(ctx: Context, section: str) -> Figure:
    moves = _moves(ctx)
    ratios = [m.since_node_ready / m.budget for m in moves]
    slowest = moves[ratios.index(max(ratios))]
    return Figure(
        section,
        NAME,
        max(ratios),
        "x",
        f"one descheduling interval ({DESCHEDULING_INTERVAL} s) + the grace the pod used to save "
        f"({slowest.save:.1f} s of its {GRACE:g} s)",
        GOAL,
        note=(
            f"the slowest of {len(moves)} moves back at speed 60 (median {statistics.median(ratios):.2f}x): "
            f"{slowest.since_node_ready:.1f} s from the node Ready = eviction "
            f"{slowest.eviction:.1f} s + save {slowest.save:.1f} s + replacement running {slowest.start:.1f} s "
            f"(the JobSet's fresh Job, the scheduler, the process); before it, the refill's node arrival "
            f"{slowest.node_arrival:.1f} s (the platform's provisioning), {slowest.total:.1f} s from the refill"
        ),
        samples={
            "from node Ready": [m.since_node_ready for m in moves],
            "budget": [m.budget for m in moves],
            "from the refill": [m.total for m in moves],
        },
    )
