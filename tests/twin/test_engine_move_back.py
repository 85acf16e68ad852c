"""Back to half price, on a bare twin with the real scheduler and the real descheduler: a PREEMPTIBLE_FIRST run
that fell back to the standard node (the region had no preemptible capacity when the cluster was created) is
moved back to a preemptible node once capacity returns, resumes from its checkpoint there, and nothing is
counted as a failure; it is not moved before it is ``move_back_interval_seconds`` old, nor while it is
annotated ``descheduler.alpha.kubernetes.io/prefer-no-eviction``. The issue's Sweep: with the region's capacity
back, the trial that waited starts on a preemptible node and the one that ran on standard is moved to the other.

``ClusterControllers(descheduler=True)`` installs the descheduler's chart (the copy scripts/install-kubernetes
takes from the pinned module) with the move-back policy, and JobSet's, through a real ``pulumi up``; the twin
runs their pods as the binaries built from the same modules. The run is a BatchJob (its default JobSet, a
fresh Job per attempt, so no move waits for the Job controller's growing failure backoff) whose pod is a real
local process (tests/twin/workloads/train_loop.py on the checkpoint runtime).

Oracles: the pods as the API server has them (node, ``DisruptionTarget`` condition and its reason, times), the
JobSet's conditions, the replacement's log (the runtime's ``resumed step=`` line).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.report import parse_resumed
from together_clusters.components.controllers.move_back import NO_EVICTION_ANNOTATION
from together_clusters.emulator.kubernetes.options import TwinOptions
from together_clusters.platform import FALLBACK_PRIORITY_CLASS, PLACEMENT_LABEL, ComputeClass

from ._programs import local_process
from ._twin import GPU, REGION, failed_workloads, pod_log, twin_stack, up, wait_for
from .move_back import (
    API_KEY,
    DESCHEDULING_INTERVAL,
    MOVE_BACK_INTERVAL,
    TRAIN_LOOP,
    Disruptions,
    charts_missing,
    fall_back,
    fallback_run,
    fallen_back,
    logged,
    move_back_after_refill,
    program,
    ready_preemptible_nodes,
    running_on,
    saved_once,
    wait_until_movable,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
SWEEP = "lr"
TRIALS = f"app.kubernetes.io/name={SWEEP}"
SWEEP_OF_TWO = program(
    16,
    f"""\
Sweep(
    {SWEEP!r},
    SweepArgs(
        container={local_process(TRAIN_LOOP)},
        trials=({{"lr": 0.1}}, {{"lr": 0.2}}),
        checkpoint=store.storage,
        sweep_name={SWEEP!r},
        placement=NodePlacement(ComputeClass.PREEMPTIBLE_FIRST),
        pod=PodSettings(namespace="default"),
    ),
    opts=pulumi.ResourceOptions(provider=provider, depends_on=[store]),
)""",
)


def descheduling_loops(core: client.CoreV1Api) -> int:
    """How many loops the descheduler has ended: each logs its evictions (``klog.V(1)``; the chart runs it at
    ``-v 3``), whether it evicted anything or not."""
    pods = core.list_pod_for_all_namespaces(label_selector="app.kubernetes.io/name=descheduler").items
    return sum(
        pod_log(core, p.metadata.name, p.metadata.namespace).count("Number of evictions/requests")
        for p in pods
    )


def test_a_fallback_run_is_moved_back_to_preemptible_when_capacity_returns_and_resumes(
    tmp_path: Path,
) -> None:
    if (missing := charts_missing()) is not None:
        pytest.skip(missing)
    # A shortfall from the start: no preemptible node at all when the stack comes up.
    with fallback_run(tmp_path) as run, Disruptions(run.api) as seen:
        core, admin = run.core, run.admin
        # Short of preemptible capacity, the run takes the idle standard node.
        fallback = fallen_back(run)
        assert ready_preemptible_nodes(core) is None
        assert fallback.spec.priority_class_name == FALLBACK_PRIORITY_CLASS
        assert fallback.metadata.labels[PLACEMENT_LABEL] == ComputeClass.PREEMPTIBLE_FIRST.value

        # Capacity returns while the pod is young: the descheduler waits until it is old enough.
        admin.set_capacity(REGION, GPU, 8)
        wait_for(lambda: ready_preemptible_nodes(core), "the refilled preemptible node")
        moved = wait_for(
            lambda: running_on(core, "preemptible", {fallback.metadata.uid}),
            "the run moved back to the preemptible node",
            timeout=MOVE_BACK_INTERVAL + 6 * DESCHEDULING_INTERVAL + 60,
        )
        reason, evicted_at = seen.disrupted[fallback.metadata.uid]
        assert reason == "EvictionByEvictionAPI"  # the descheduler's eviction, survived as a disruption
        age = (evicted_at - fallback.metadata.creation_timestamp).total_seconds()
        # Condition times are whole seconds.
        assert age >= MOVE_BACK_INTERVAL - 1, f"moved back at {age:.1f} s old"
        resumed = wait_for(
            lambda: logged(core, moved, lambda t: parse_resumed(t) is not None), "the resumed line"
        )
        step = parse_resumed(resumed)
        assert step is not None and step.step > 0, resumed
        print(f"moved back at {age:.1f} s old, resumed from step {step.step}")

        # Preempted there, with no capacity to refill: the replacement falls back to standard at once...
        been = {fallback.metadata.uid, moved.metadata.uid}
        again = fall_back(core, admin, run.cluster_id, been)
        # ...and once it is old enough to move, capacity returns: how long until it runs on preemptible.
        timed = move_back_after_refill(run, seen, again, been)
        print(f"refill -> moved-back pod Running: {timed.total:.1f} s ({timed.parts()})")
        # In this order, on the cluster's clock: the refilled node there, the descheduler's eviction (not one
        # made while there was no room, the pod landing on standard again), the pod's save to its exit, and
        # only then its replacement on that node. How soon is the benchmark's to time (section 8's move back).
        back = timed.replacement
        node: Any = core.read_node(back.spec.node_name)
        reason, evicted_at = seen.disrupted[again.metadata.uid]
        assert reason == "EvictionByEvictionAPI", seen.disrupted
        order: list[datetime] = [
            node.metadata.creation_timestamp,
            evicted_at,
            seen.ended[again.metadata.uid],
            seen.running[back.metadata.uid],
        ]
        assert order == sorted(order), order
        wait_for(lambda: logged(core, back, lambda t: parse_resumed(t) is not None), "the resumed line")

        # A pod annotated prefer-no-eviction (what a pod says while it saves) stays where it is, old enough
        # and with room on a preemptible node, until the annotation goes.
        been |= {again.metadata.uid, back.metadata.uid}
        kept = fall_back(core, admin, run.cluster_id, been)
        marked = {"metadata": {"annotations": {NO_EVICTION_ANNOTATION: "saving"}}}
        core.patch_namespaced_pod(kept.metadata.name, "default", marked)
        wait_until_movable(kept)
        admin.set_capacity(REGION, GPU, 8)
        wait_for(lambda: ready_preemptible_nodes(core), "the refilled preemptible node", timeout=30)
        # Two more of the descheduler's own loops (one began after the node was Ready), not two intervals
        # of this machine's clock: each had the room and the pod old enough, and left it.
        loops = descheduling_loops(core)
        wait_for(
            lambda: descheduling_loops(core) >= loops + 2, "two descheduling loops with room on preemptible"
        )
        assert kept.metadata.uid not in seen.disrupted
        assert running_on(core, "standard", been) is not None
        unmarked = {"metadata": {"annotations": {NO_EVICTION_ANNOTATION: None}}}
        core.patch_namespaced_pod(kept.metadata.name, "default", unmarked)
        released = time.monotonic()
        been.add(kept.metadata.uid)
        wait_for(lambda: running_on(core, "preemptible", been), "the pod moved once unmarked", timeout=60)
        print(f"kept on standard while marked; moved {time.monotonic() - released:.1f} s after unmarking")

        # Every move was a disruption the JobSet restarts the run from: nothing counted as a failure.
        assert failed_workloads(run.api) == []


def test_a_sweep_trial_that_ran_on_standard_is_moved_back_beside_the_one_that_waited(tmp_path: Path) -> None:
    if (missing := charts_missing()) is not None:
        pytest.skip(missing)
    with twin_stack(tmp_path, "move-back-sweep", SWEEP_OF_TWO, API_KEY, TwinOptions(jobset=False)) as stack:
        admin = stack.emulator.admin
        admin.set_capacity(REGION, GPU, 0)  # a shortfall from the start
        api = up(stack)
        core = client.CoreV1Api(api)
        with Disruptions(api, TRIALS) as seen:
            # One standard node: the first trial takes it, the second waits.
            first = wait_for(
                lambda: running_on(core, "standard", set(), TRIALS), "a trial on the standard node"
            )
            saved_once(core, first)
            assert running_on(core, "standard", {first.metadata.uid}, TRIALS) is None

            # Capacity returns (two nodes): the waiting trial starts on one at once, the first moves to the
            # other once it is old enough, and resumes from its checkpoint.
            admin.set_capacity(REGION, GPU, 16)
            waited = wait_for(
                lambda: running_on(core, "preemptible", {first.metadata.uid}, TRIALS), "the waiting trial"
            )
            moved = wait_for(
                lambda: running_on(core, "preemptible", {first.metadata.uid, waited.metadata.uid}, TRIALS),
                "the first trial moved back",
                timeout=MOVE_BACK_INTERVAL + 6 * DESCHEDULING_INTERVAL + 60,
            )
            reason, _ = seen.disrupted[first.metadata.uid]
            assert reason == "EvictionByEvictionAPI"
            assert waited.metadata.uid not in seen.disrupted  # the trial already on preemptible stays
            resumed = wait_for(
                lambda: logged(core, moved, lambda t: parse_resumed(t) is not None), "the resumed line"
            )
            step = parse_resumed(resumed)
            assert step is not None and step.step > 0, resumed
            trial = "jobset.sigs.k8s.io/jobset-name"  # each trial is a JobSet of its own
            assert (
                moved.metadata.labels[trial] == first.metadata.labels[trial] != waited.metadata.labels[trial]
            )
        assert failed_workloads(api) == []
