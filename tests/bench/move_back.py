"""Section 8's move back: how long a user waits, once a preemptible node is Ready again, for a
``PREEMPTIBLE_FIRST`` run that fell back to the standard node to run on that node again; against the issue's
budget: one descheduling interval, plus the grace the pod used to save, plus one replacement start measured
alone (issue 40, part 5).

The run, its program and the timing are the twin test's (tests/twin/move_back.py, used by
tests/twin/test_engine_move_back.py): a real ``pulumi up`` on a bare twin at clock speed 60 that installs JobSet
and the descheduler (pods movable from 15 s old), a BatchJob whose pod is a real local process on the checkpoint
runtime, the region's capacity at 0 so that it falls back, then given back with the emulator's admin
``set_capacity``. The clock starts when the refilled preemptible node is Ready: before that is the platform's
provisioning, which no descheduler can shorten (reported beside the figure); it stops when the replacement's
container runs. Each further move is prepared as the test does: the moved-back pod's node preempted with no
capacity to refill, its replacement on the standard node old enough to move. The goal is a bound ("within"),
and the wait for the descheduler's next look depends on where in its interval the node arrives: each refill is
delayed a further 1/MOVES of an interval, so that the moves meet the loop at different points, and the figure
is the slowest move's.

The replacement start alone: after each move back, the bench itself evicts the moved-back pod (the Eviction
API, as the descheduler does) while its preemptible node has room for the replacement, and times the evicted
container's exit to the replacement's container running: the same JobSet's fresh Job, the scheduler and the
process, with no descheduler to wait for. The budget takes the median of these.

Two intervals: the bench's (5 s), and the descheduler's default (120 s) as the twin's clock runs it: the twin
runs the platform at speed 60 (a pod's 300 s grace is 5 s there), so 120 s of the cluster's time are
:data:`DEFAULT_INTERVAL` = 2 s. Kubernetes' own controllers and the process run in real time: the replacement's
start weighs 60 times more against a scaled interval than on a real cluster, where 120 s dwarfs it.
"""

from __future__ import annotations

import statistics
from typing import Any

from kubernetes import client

from tests.twin._twin import wait_for
from tests.twin.move_back import (
    DESCHEDULING_INTERVAL,
    GRACE,
    SPEED,
    Disruptions,
    FallbackRun,
    MoveBack,
    fall_back,
    fallback_run,
    fallen_back,
    move_back_after_refill,
    running_on,
)

from .context import Context
from .figures import Figure, Goal

NAME = "refilled node Ready to the moved-back pod Running, over one descheduling interval + the grace it used + one replacement start"
NAME_DEFAULT = f"{NAME}, at the descheduler's default interval (120 s, at speed 60)"
GOAL = Goal("<=", 1.0)
MOVES = 4
"""Moves back timed in one run (each about 25 s: a fall back, the wait until the pod may move, the refill)."""
DEFAULT_INTERVAL = round(120 / SPEED)
"""The descheduler's default interval (120 s) on the twin's clock: 2 s."""


def _start_alone(run: FallbackRun, seen: Disruptions, pod: Any, besides: set[str]) -> tuple[Any, float]:
    """Evict ``pod`` (Running on a preemptible node) as the descheduler would, and time its container's exit to
    its replacement's container running on a preemptible node: (the replacement, seconds)."""
    uid = pod.metadata.uid
    eviction = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace="default"))
    run.core.create_namespaced_pod_eviction(pod.metadata.name, "default", eviction)
    again = wait_for(lambda: running_on(run.core, "preemptible", besides | {uid}), "the replacement, alone")
    ended = wait_for(lambda: seen.seen_at.get(("ended", uid)), "the evicted container's end")
    started = wait_for(lambda: seen.seen_at.get(("running", again.metadata.uid)), "the replacement's start")
    return again, started - ended


def _moves(ctx: Context, interval: int) -> tuple[list[MoveBack], list[float]]:
    """``MOVES`` moves back with the descheduler looking every ``interval`` s, and after each a replacement
    start alone."""
    timed: list[MoveBack] = []
    alone: list[float] = []
    workdir = ctx.workdir / f"move-back-{interval}"
    with fallback_run(workdir, "bench-move-back", interval) as run, Disruptions(run.api) as seen:
        ctx.progress(f"move back ({interval} s interval): the stack is up, waiting for its run on the standard node")
        pod = fallen_back(run)
        been: set[str] = set()
        while True:
            phase = len(timed) * interval / MOVES
            move = move_back_after_refill(run, seen, pod, been, delay=phase)
            timed.append(move)
            been |= {pod.metadata.uid, move.replacement.metadata.uid}
            replacement, start = _start_alone(run, seen, move.replacement, been)
            alone.append(start)
            been.add(replacement.metadata.uid)
            ctx.progress(
                f"move back {len(timed)}/{MOVES}: {move.total:.1f} s from the refill ({move.parts()}); "
                f"a replacement start alone {start:.1f} s"
            )
            if len(timed) == MOVES:
                return timed, alone
            pod = fall_back(run.core, run.admin, run.cluster_id, been)


def run(ctx: Context, section: str) -> list[Figure]:
    """The move back at the bench's interval and at the default one (scaled to the twin's clock)."""
    return [
        _figure(section, NAME, DESCHEDULING_INTERVAL, *_moves(ctx, DESCHEDULING_INTERVAL)),
        _figure(section, NAME_DEFAULT, DEFAULT_INTERVAL, *_moves(ctx, DEFAULT_INTERVAL)),
    ]


def _figure(section: str, name: str, interval: int, moves: list[MoveBack], alone: list[float]) -> Figure:
    start_alone = statistics.median(alone)
    budgets = [interval + m.save + start_alone for m in moves]
    ratios = [m.since_node_ready / b for m, b in zip(moves, budgets, strict=True)]
    slowest = moves[ratios.index(max(ratios))]
    return Figure(
        section,
        name,
        max(ratios),
        "x",
        f"one descheduling interval ({interval} s) + the grace the pod used to save ({slowest.save:.1f} s of its "
        f"{GRACE:g} s) + one replacement start alone (median {start_alone:.1f} s of {len(alone)})",
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
            "budget": budgets,
            "start alone": alone,
            "from the refill": [m.total for m in moves],
        },
    )
