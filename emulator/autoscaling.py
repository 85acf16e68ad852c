"""Autoscaling as the platform does it: when a cluster created with ``auto_scale`` adds or removes a node (pure).

The SDK (together 3.1.1) documents two create fields and nothing more: ``auto_scale`` ("the cluster will
automatically scale the number of GPU worker nodes between num_gpus and auto_scale_max_gpus based on the
workload") and ``auto_scale_max_gpus`` ("maximum number of GPUs to which the cluster can be auto-scaled up").
Neither can be updated and the cluster reply does not report them. What the docs leave open, the emulator
answers so that a program is safe either way:

* **Which class grows.** Standard (on-demand) nodes of 8 GPUs only. Autoscaling never touches the
  preemptible target (``num_preemptible_gpus``) nor a preemptible node: the fulfillment of the preemptible
  pool goes on as without it.
* **What the reply says.** ``num_gpus`` stays the floor the program set (what the create or the last update
  sent), so a refresh never sees the platform's scaling as a change of the code's field; the live size is the
  standard nodes in ``gpu_worker_nodes`` (those beyond ``num_gpus / 8`` were added by autoscaling). With
  ``--extra-fields`` the reply also carries ``auto_scale`` and ``auto_scale_max_gpus`` (the real reply type
  does not define them: the package never relies on them). Without ``auto_scale_max_gpus`` the ceiling is the
  floor: nothing grows.
* **What the demand is.** GPUs of pods waiting for lack of GPUs (``pending_gpus``), and which nodes run a pod
  (``busy``). The Kubernetes twin reports both on each pass from the cluster's API (GPU pods Pending with
  ``PodScheduled=False`` reason ``Unschedulable``, each pod's GPUs counted as the scheduler counts them, a
  pod asking more than one node's GPUs left out: no node added could take it); without a twin the admin API
  sets them (``POST /_emulator/autoscaling``), standing in for the scheduler.
* **Scale-up.** Each 8 pending GPUs not already covered by an added node that runs no pod yet want one
  node, never past the ceiling. The nodes are requested ``SCALE_UP_DELAY_S`` (nominal) after the demand
  is seen, then boot as any node does (``TogetherScaledUp`` when they appear, Ready two minutes later).
* **Scale-down.** A node added by autoscaling that has run no pod for ``IDLE_WINDOW_S`` (nominal, ten
  minutes) is removed (``TogetherScaledDown``), never below the floor and never a node running a pod (a
  DaemonSet pod does not count: the twin reports only nodes running other pods). The floor's own nodes are
  never removed by autoscaling. Lowering ``num_gpus`` by an update on an autoscaling cluster hands the
  surplus floor nodes to autoscaling, which removes them once idle.

Durations are nominal: the platform's clock shortens them by its speed, as it does node boots (the idle window
never below :data:`IDLE_WINDOW_FLOOR_S`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .catalog import GPUS_PER_NODE

SCALE_UP_DELAY_S = 60.0
"""How long (nominal seconds) the platform takes to notice pending demand and request nodes for it."""
IDLE_WINDOW_S = 600.0
"""How long (nominal seconds) a node added by autoscaling runs no pod before it is removed."""
IDLE_WINDOW_FLOOR_S = 30.0
"""The shortest the idle window gets on a fast clock (seconds of the clock, as :func:`idle_window` gives).
The platform's ten minutes are far longer than what a new node waits for its first pod in Kubernetes: the
node lifecycle controller lifting the not-ready taint (it looks every 5 s) and the scheduler retrying a pod
it found unschedulable (its backoff grows to 10 s). A clock at 60x would shorten the window to 10 s, no longer
than those, and on a loaded machine a node could go before the pod it was added for was bound to it."""


@dataclass(frozen=True)
class StandardNode:
    """A standard node as autoscaling sees it."""

    node_id: str
    autoscaled: bool
    """Added by autoscaling (only such nodes are removed when idle)."""
    busy: bool
    """Runs a pod (as last reported)."""
    idle_since: float | None = None
    """Since when it has run no pod (None: it runs one, or has not booted yet)."""


def idle_window(duration: Callable[[float], float]) -> float:
    """The idle window on a clock that shortens nominal durations with ``duration``: never below
    :data:`IDLE_WINDOW_FLOOR_S` (a clock slower than the floor keeps its own)."""
    return max(duration(IDLE_WINDOW_S), min(IDLE_WINDOW_S, IDLE_WINDOW_FLOOR_S))


def ceiling_gpus(floor_gpus: int, auto_scale_max_gpus: int | None) -> int:
    """The most standard GPUs autoscaling grows to: ``auto_scale_max_gpus``, never below the floor."""
    return max(floor_gpus, auto_scale_max_gpus or 0)


def nodes_to_add(floor_gpus: int, ceiling: int, nodes: Sequence[StandardNode], pending_gpus: int) -> int:
    """How many standard nodes to add for ``pending_gpus``: one per 8 GPUs not covered by an added node that
    runs no pod yet (the pods will go there once it is Ready), within the ceiling."""
    wanted = math.ceil(max(0, pending_gpus) / GPUS_PER_NODE)
    covered = sum(1 for n in nodes if n.autoscaled and not n.busy)
    room = max(ceiling, floor_gpus) // GPUS_PER_NODE - len(nodes)
    return max(0, min(wanted - covered, room))


def nodes_to_remove(
    floor_gpus: int, nodes: Sequence[StandardNode], now: float, idle_window: float
) -> list[str]:
    """The added nodes idle for ``idle_window`` by ``now`` (longest idle first), as many as the floor allows."""
    idle = sorted(
        (
            n
            for n in nodes
            if n.autoscaled and not n.busy and n.idle_since is not None and n.idle_since + idle_window <= now
        ),
        key=lambda n: (n.idle_since, n.node_id),
    )
    room = len(nodes) - floor_gpus // GPUS_PER_NODE
    return [n.node_id for n in idle[: max(0, room)]]


def next_idle_check(nodes: Sequence[StandardNode], idle_window: float) -> float | None:
    """When the first added node that is idle now will have been idle for ``idle_window`` (None: none is)."""
    return min(
        (
            n.idle_since + idle_window
            for n in nodes
            if n.autoscaled and not n.busy and n.idle_since is not None
        ),
        default=None,
    )
