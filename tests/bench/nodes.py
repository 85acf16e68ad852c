"""Waiting for a bench cluster's nodes: Ready and free of the node lifecycle's taints (not-ready,
unreachable, unschedulable), the nodes the scheduler would place a pod on."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client


def ready_for_pods(node: Any) -> bool:
    """Whether ``node`` (a ``V1Node``) is Ready and carries none of the ``node.kubernetes.io/`` taints."""
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []) and not any(
        t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or []
    )


def wait_for_ready_nodes(core: client.CoreV1Api, count: int, timeout: float) -> None:
    """Return once ``count`` nodes are ready for pods; RuntimeError past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len([n for n in core.list_node().items if ready_for_pods(n)]) >= count:
            return
        time.sleep(0.5)
    raise RuntimeError(f"fewer than {count} Ready nodes within {timeout:g}s")
