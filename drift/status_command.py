"""The ``together-clusters status`` subcommand: its arguments, and the capacity report of a stack's clusters."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from together_clusters.provider.client import TogetherClient
from together_clusters.provider.errors import NotFoundError, WrongTargetError
from together_clusters.provider.settings import API_KEY_CONFIG, API_KEY_ENV

from . import api_settings, capacity, live
from .arguments import add_project_options, add_stack_option, non_negative
from .observe import export
from .stack_state import StateResource, clusters
from .status_render import status_json, status_text
from .timeline import Timeline, allocation_timeline
from .workspace import EngineSettings, StackInPlace, engine_call, open_workspace, selected_stack


def add_parser(sub: Any) -> None:
    """Register ``together-clusters status``."""
    status = sub.add_parser(
        "status",
        help="capacity of the stack's clusters: preemptible allocation, nodes, events, savings",
        description="Per cluster of the stack: desired and allocated preemptible GPUs, nodes, recent "
        "lifecycle events and the hourly saving of preemptible capacity. Reads the state, never writes it. "
        "The API key and endpoint are the stack's (together:apiKey, together:baseUrl, the endpoint a "
        "cluster was created on), else TOGETHER_API_KEY / TOGETHER_BASE_URL.",
    )
    add_stack_option(status)
    add_project_options(status)
    status.add_argument(
        "--price-per-gpu-hour",
        type=non_negative,
        default=None,
        metavar="P",
        help="on-demand price per GPU-hour, to estimate the saving (preemptible is 50%% off)",
    )
    status.add_argument(
        "--png", type=Path, default=None, metavar="FILE", help="also draw the allocation timeline to this PNG"
    )
    status.add_argument(
        "--window-hours",
        type=non_negative,
        default=24.0,
        metavar="H",
        help="how far back events and the timeline go (default 24)",
    )


def run(args: argparse.Namespace) -> int:
    """Read the stack's clusters from its state and the API, print their capacity (0 shown)."""
    workspace = open_workspace(EngineSettings(project_dir=args.cwd, pulumi=args.pulumi))
    stack = StackInPlace(args.stack or selected_stack(workspace), workspace)
    config = engine_call(f"reading the config of stack {stack.name}", stack.get_all_config)
    resources = clusters(export(stack))
    stack_api = api_settings.from_stack_config(config)
    snapshots = _snapshots(resources, stack_api)
    end = capacity.window_end(list(snapshots.values()), datetime.now(UTC))
    start, end = capacity.window(end, args.window_hours)
    price = args.price_per_gpu_hour
    statuses = [
        capacity.cluster_status(
            r.name, r.id, snapshots.get(r.id), start=start, end=end, price_per_gpu_hour=price
        )
        for r in resources
    ]
    if args.png is not None:
        from .plot import write_png

        write_png(args.png, stack.name, _timelines(resources, snapshots, start, end))
    if args.json:
        print(status_json(stack.name, statuses, start, end, price))
    else:
        print(status_text(stack.name, statuses, start, end, price), end="")
        if args.png is not None:
            print(f"\nTimeline written to {args.png}")
    return 0


def _snapshots(resources: Sequence[StateResource], stack_api: api_settings.ApiSettings) -> dict[str, Any]:
    """Each cluster read with the key and endpoint the provider would use for it."""
    by_settings: dict[api_settings.ApiSettings, list[str]] = {}
    for res in resources:
        by_settings.setdefault(api_settings.for_cluster(res, stack_api), []).append(res.id)
    by_id = {res.id: res for res in resources}
    found: dict[str, Any] = {}
    for settings, ids in by_settings.items():
        with TogetherClient(api_key=settings.api_key, base_url=settings.base_url) as client:
            _refuse_another_project(client, [by_id[i] for i in ids])
            found.update(live.fetch_snapshots(ids, client))
    return found


def _refuse_another_project(client: TogetherClient, resources: Sequence[StateResource]) -> None:
    """A key of another project than the one a cluster was created in cannot see it: the API's 404 would
    read as "deleted". Refused instead, naming both projects (the provider refuses the same)."""
    try:
        here = client.whoami().project_id
    except NotFoundError:  # an API without whoami: nothing to compare
        return
    for res in resources:
        recorded = res.outputs.get(api_settings.RECORDED_PROJECT)
        if isinstance(recorded, str) and recorded and here and recorded != here:
            raise WrongTargetError(
                f"cluster {res.id} ({res.name}) was created in project {recorded!r}, and the API key in use "
                f"belongs to project {here!r}, which cannot see it. Use a key of project {recorded!r} "
                f"(`pulumi config set --secret {API_KEY_CONFIG} <key>` or {API_KEY_ENV})."
            )


def _timelines(
    resources: Sequence[StateResource], snapshots: dict[str, Any], start: datetime, end: datetime
) -> list[tuple[str, Timeline]]:
    """One timeline per live cluster, from the window's start or the cluster's creation, whichever is later."""
    lines = []
    for res in resources:
        snap = snapshots.get(res.id)
        if snap is None:
            continue
        created = snap.get("created_at")
        begin = max(start, capacity.parse_time(created)) if created else start
        lines.append((res.name, allocation_timeline(snap, begin, end)))
    return lines
