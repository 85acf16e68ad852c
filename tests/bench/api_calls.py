"""Section 2: API requests per operation, counted at the emulator (tests/bench/counting_emulator.py),
and whether the reads of ``preview --refresh`` overlap."""

from __future__ import annotations

from collections import Counter
from typing import Any

from together_clusters.emulator.admin_client import AdminClient

from .context import Context
from .figures import Figure, Goal
from .servers import Served, recorded_requests
from .stacks import make_stack

SECTION = "2. API calls per operation"
REGIONS = "GET /v1/compute/regions"
LIST = "GET /v1/compute/clusters"
GET_ONE = "GET /v1/compute/clusters/{id}"
PUT = "PUT /v1/compute/clusters/{id}"
DELETE = "DELETE /v1/compute/clusters/{id}"
POST = "POST /v1/compute/clusters"
SLOW_READ_S = 0.2


def breakdown(requests: list[dict[str, Any]]) -> Counter[str]:
    """How many requests each route got."""
    return Counter(f"{r['method']} {r['route']}" for r in requests)


def describe(counts: Counter[str]) -> str:
    return ", ".join(f"{route}: {n}" for route, n in sorted(counts.items())) or "no requests"


def max_in_flight(requests: list[dict[str, Any]]) -> int:
    """The most requests the server was answering at one moment."""
    edges = sorted([(r["start"], 1) for r in requests] + [(r["end"], -1) for r in requests])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def run(ctx: Context, emulator: Served) -> list[Figure]:
    n = ctx.scale.stack_size
    stack = make_stack(ctx.workdir, "clusters", "calls", n, emulator.url)
    figures: list[Figure] = []

    recorded_requests(emulator)
    stack.up()
    create = breakdown(recorded_requests(emulator))
    figures.append(
        Figure(
            SECTION,
            f"`up` of {n} clusters: cluster lists",
            create[LIST],
            "calls",
            "1 per burst of creates: the names' holders before the first POST, which tell a lost reply's "
            "cluster from another one of the same name (the API has no idempotency key)",
            Goal("<=", 1, "calls"),
            note=describe(create),
        )
    )

    stack.preview()
    preview = breakdown(recorded_requests(emulator))
    figures.append(
        Figure(
            SECTION,
            f"`preview` of {n} clusters: region catalog lookups",
            preview[REGIONS],
            "calls",
            "1 per preview",
            Goal("<=", 1, "calls"),
            note=describe(preview),
        )
    )

    stack.refresh_preview()
    refresh_requests = recorded_requests(emulator)
    refresh = breakdown(refresh_requests)
    figures.append(
        Figure(
            SECTION,
            f"`preview --refresh` of {n} clusters: GETs per read",
            refresh[GET_ONE] / n,
            "calls",
            "1 GET per cluster",
            Goal("<=", 1, "calls"),
            note=describe(refresh),
        )
    )
    # Reads answered in a millisecond end before the next one arrives: whether they overlap shows only
    # when the API is slow, so each read is held at the server (the emulator's delay fault) this long.
    admin = AdminClient(emulator.url)
    try:
        admin.add_fault(count=n, method="GET", path="/v1/compute/clusters/", delay_s=SLOW_READ_S)
        stack.refresh_preview()
    finally:
        admin.clear_faults()
        admin.close()
    reads = [r for r in recorded_requests(emulator) if f"{r['method']} {r['route']}" == GET_ONE]
    if reads:
        span = max(r["end"] for r in reads) - min(r["start"] for r in reads)
        figures.append(
            Figure(
                SECTION,
                f"`preview --refresh`: reads of {n} clusters in flight at once (max), each held "
                f"{SLOW_READ_S * 1000:.0f} ms",
                max_in_flight(reads),
                "requests",
                "1 (one read after another)",
                Goal(">=", 2, "requests"),
                note=f"the {len(reads)} reads took {span:.2f} s from first to last: "
                f"{span / SLOW_READ_S:.1f}x one held read ({n}x if one after another)",
            )
        )

    stack.set_config("preemptible", "8")
    recorded_requests(emulator)
    stack.up()
    update = breakdown(recorded_requests(emulator))
    figures.append(
        Figure(
            SECTION,
            "update of 1 cluster (`up` raising num_preemptible_gpus): PUTs",
            update[PUT],
            "calls",
            "1 PUT, then the polls of the wait",
            Goal("<=", 1, "calls"),
            note=f"{describe(update)} (the polls are the GETs of the updated cluster; the region "
            "lookups come from `check` of every cluster during `up`)",
        )
    )

    stack.destroy()
    delete = breakdown(recorded_requests(emulator))
    figures.append(
        Figure(
            SECTION,
            f"`destroy` of {n} clusters: requests per delete",
            sum(delete.values()) / n,
            "calls",
            "1 DELETE, then the polls until the cluster is gone",
            None,
            note=describe(delete),
        )
    )
    return figures
