"""The workloads part of one stack's drift check: the stack's clusters read from the Together API (as
``status`` reads them), their workloads from each cluster's Kubernetes API, and the stalled ones kept
(shell).

Information only: whatever stops the read becomes a line of the report, never the stack's error (the
preview already said whether the stack is in sync).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pulumi import automation as auto

from together_clusters.errors import EngineError
from together_clusters.provider.errors import TogetherError

from .. import api_settings, live, workloads
from ..stack_state import clusters
from ..workspace import engine_call


def stalled_and_unread(
    stack: auto.Stack, deployed: Mapping[str, Any]
) -> tuple[list[workloads.Stall], list[str]]:
    """The stack's workloads stalled for capacity, and why a cluster's workloads could not be read."""
    resources = clusters(deployed)
    if not resources:
        return [], []
    try:
        config = engine_call(f"reading the config of stack {stack.name}", stack.get_all_config)
        snapshots = live.stack_snapshots(resources, api_settings.from_stack_config(config), workloads=True)
    except (EngineError, TogetherError, OSError) as exc:
        return [], [f"the stack's clusters could not be read: {' '.join(str(exc).split())}"]
    now = datetime.now(UTC)
    stalled: list[workloads.Stall] = []
    unread: list[str] = []
    for res in resources:
        snapshot = snapshots.get(res.id)
        if snapshot is None:
            continue  # a cluster deleted outside the code: the report's "missing" says so
        report = workloads.report(snapshot.get("kubernetes"), now, None, res.name)
        stalled += report.stalled
        if report.unread:
            unread.append(f"{res.name}: {report.unread}")
    return stalled, unread
