"""Section 6: the drift check (``together-clusters drift``) vs ``pulumi preview --refresh`` of the same
stack, and a fleet of stacks checked in parallel vs one."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from .context import Context
from .figures import Figure, Goal, median, ratio, seconds
from .servers import Served
from .stacks import Stack, make_stack

SECTION = "6. Drift"
IN_SYNC_OR_DRIFT = (0, 2)  # drift's exit codes: 0 in sync, 2 drift found


def drift_check(stack: Stack) -> float:
    """Wall time of ``together-clusters drift`` on ``stack``, run as users run it."""
    command = [sys.executable, "-m", "together_clusters.cli", "drift", "--stack", stack.name]
    command += ["--cwd", str(stack.project), "--json"]
    started = time.perf_counter()
    proc = subprocess.run(
        command, cwd=stack.project, env=stack.env, capture_output=True, text=True, timeout=1800, check=False
    )
    if proc.returncode not in IN_SYNC_OR_DRIFT:
        raise RuntimeError(f"together-clusters drift failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return time.perf_counter() - started


def run(ctx: Context, emulator: Served) -> list[Figure]:
    n = ctx.scale.stack_size
    stack = make_stack(ctx.workdir, "clusters", "drift", n, emulator.url)
    stack.up()
    drift: list[float] = []
    refresh: list[float] = []
    for rep in range(ctx.scale.repetitions):
        pair = [(drift, lambda: drift_check(stack)), (refresh, stack.refresh_preview)]
        for into, act in pair if rep % 2 == 0 else reversed(pair):
            into.append(act())
        ctx.progress(f"  drift {drift[-1]:.2f} s, preview --refresh {refresh[-1]:.2f} s")
    stack.destroy()
    figures = [
        Figure(
            SECTION,
            f"`together-clusters drift` of {n} clusters",
            ratio(drift, refresh),
            "x",
            f"`pulumi preview --refresh` of the same stack: {seconds(median(refresh))}",
            Goal("<=", 1.5),
            note=f"ours {seconds(median(drift))}",
            samples={"ours_s": drift, "floor_s": refresh},
        )
    ]

    k, size = ctx.scale.fleet_stacks, ctx.scale.fleet_stack_size
    fleet = [make_stack(ctx.workdir, "clusters", f"fleet{i}", size, emulator.url) for i in range(k)]
    with ThreadPoolExecutor(k) as pool:
        list(pool.map(Stack.up, fleet))
    one: list[float] = []
    many: list[float] = []

    def check_fleet() -> float:
        started = time.perf_counter()
        with ThreadPoolExecutor(k) as pool:
            list(pool.map(drift_check, fleet))
        return time.perf_counter() - started

    for rep in range(ctx.scale.repetitions):
        pair = [(one, lambda: drift_check(fleet[0])), (many, check_fleet)]
        for into, act in pair if rep % 2 == 0 else reversed(pair):
            into.append(act())
        ctx.progress(f"  drift of 1 stack {one[-1]:.2f} s, of {k} in parallel {many[-1]:.2f} s")
    with ThreadPoolExecutor(k) as pool:
        list(pool.map(Stack.destroy, fleet))
    figures.append(
        Figure(
            SECTION,
            f"drift of a fleet of {k} stacks of {size} clusters, in parallel",
            ratio(many, one),
            "x",
            f"drift of one of them: {seconds(median(one))}",
            None,
            note=f"{k} one after another would be {k}x; ours {seconds(median(many))}",
            samples={"ours_s": many, "floor_s": one},
        )
    )
    return figures
