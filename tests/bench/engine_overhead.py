"""Section 1: what the engine does with N clusters vs N no-op dynamic resources, same engine, same run.

Three stacks against one emulator (clock fast, so provisioning is short): ``clusters`` (our Cluster),
``noop`` (tests/bench/noop_provider.py, the floor) and ``clusters, lifted host`` (our Cluster with the
dynamic-provider host of together_clusters.provider.host, whose gRPC pool is as large as the engine's
parallelism instead of the SDK's 4, opted into through Pulumi.yaml as the templates do by default). Each
repetition runs up, preview, preview --refresh and destroy on each stack, the stacks' order alternating
between repetitions.
"""

from __future__ import annotations

from collections.abc import Callable

from .context import Context
from .figures import Figure, Goal, median, ratio, seconds
from .servers import Served
from .stacks import Stack, make_stack

SECTION = "1. Engine overhead"
SPEED = 6000.0  # emulated seconds per real second: provisioning (600 emulated s) takes 0.1 s
OPERATIONS: dict[str, Callable[[Stack], float]] = {
    "up": Stack.up,
    "preview": Stack.preview,
    "preview --refresh": Stack.refresh_preview,
    "destroy": Stack.destroy,
}
GOALS = {"preview": Goal("<=", 1.2), "preview --refresh": Goal("<=", 1.2)}
# Issue 25: many clusters from a template (which runs the lifted host) go up and away not in waves of 4.
LIFTED_GOALS = {"up": Goal("<=", 2.0), "destroy": Goal("<=", 2.0)}


def run(ctx: Context, emulator: Served) -> list[Figure]:
    n = ctx.scale.stack_size
    stacks = {
        "clusters": make_stack(ctx.workdir, "clusters", "overhead", n, emulator.url),
        "noop": make_stack(ctx.workdir, "noop", "overhead", n, emulator.url),
        "clusters, lifted host": make_stack(ctx.workdir, "clusters", "lifted", n, emulator.url, lifted=True),
    }
    samples: dict[tuple[str, str], list[float]] = {}
    for rep in range(ctx.scale.engine_repetitions):
        order = list(stacks) if rep % 2 == 0 else list(reversed(stacks))
        for operation, act in OPERATIONS.items():
            for name in order:
                elapsed = act(stacks[name])
                samples.setdefault((name, operation), []).append(elapsed)
                ctx.progress(f"  {operation} of {n} {name}: {elapsed:.2f} s (repetition {rep + 1})")
    figures = []
    for operation in OPERATIONS:
        floor = samples[("noop", operation)]
        for name in ("clusters", "clusters, lifted host"):
            ours = samples[(name, operation)]
            figures.append(
                Figure(
                    SECTION,
                    f"`{operation}` of {n} {name}",
                    ratio(ours, floor),
                    "x",
                    f"{n} no-op dynamic resources: {seconds(median(floor))}",
                    (GOALS if name == "clusters" else LIFTED_GOALS).get(operation),
                    note=f"ours {seconds(median(ours))}",
                    samples={"ours_s": ours, "floor_s": floor},
                )
            )
    return figures
