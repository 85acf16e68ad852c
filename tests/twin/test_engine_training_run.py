"""A TrainingRun deployed with a real ``pulumi up`` onto the twin, at the real controller settings (upstream's
Job backoff): worker 1 preempted again and again, in every termination mode, is replaced by a fresh Job each
time, which has no failure backoff to wait out however often (how long one takes is the benchmark's to time,
section 7's drill).

The twin's simulated pods run no container: test_engine_local_training_run.py runs the workers as real
processes (a torchrun-elastic stand-in) and proves, over preemptions in every mode, that every rank resumes
from the same committed step, no workload fails and the coordinator on the standard node is never touched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.modes import NODE_KEEPING_MODES, REMEDIATION_MODES
from together_clusters.cli.drill.report import Outcome
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.options import TwinOptions

from ._programs import IMAGE, training_run
from ._twin import (
    PodHistory,
    failed_workloads,
    fast_remediations,
    preempt_again_and_again,
    remediation_drill_twin,
    running_pods,
    twin_stack,
    up,
    wait_for,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-training-key-0123456789abcdef"
WORKERS = "app.kubernetes.io/name=pretrain,app.kubernetes.io/component=worker"
# The Job controller's 5th replacement of one index waits 160 s at upstream settings (10 s doubling).
PREEMPTIONS = 5

PROGRAM = training_run(f'ContainerSpec(image="{IMAGE}", command=("torchrun", "-m", "train"), gpus=8)')


def worker_rank(pod: Any) -> int:
    """The WORKER_RANK the pod was started with (a literal, or its completion index)."""
    (main,) = pod.spec.containers
    (env,) = [e for e in main.env if e.name == "WORKER_RANK"]
    if env.value is not None:
        return int(env.value)
    return int(pod.metadata.annotations["batch.kubernetes.io/job-completion-index"])


def running_worker(core: client.CoreV1Api, rank: int, not_uid: str | None = None) -> Any:
    return next(
        (p for p in running_pods(core, WORKERS) if worker_rank(p) == rank and p.metadata.uid != not_uid),
        None,
    )


def test_at_real_settings_a_worker_preempted_again_and_again_is_replaced_by_a_fresh_job(
    tmp_path: Path,
) -> None:
    # No job_pod_failure_backoff: the Job controller's backoff is upstream's. A worker waiting on it stalls
    # every rank (min_workers defaults to num_workers), all their GPUs paid for.
    with twin_stack(tmp_path, "twin-training", PROGRAM, API_KEY, options=TwinOptions(), speed=60) as stack:
        api = up(stack)
        core = client.CoreV1Api(api)
        admin = AdminClient(stack.emulator.base_url)
        history = PodHistory(api, "default", WORKERS).start()
        try:
            wait_for(lambda: len(running_pods(core, WORKERS)) == 2, "both workers to run")
            replaced, _ = preempt_again_and_again(
                api,
                admin,
                stack.emulator.base_url,
                lambda not_uid: running_worker(core, 1, not_uid),
                "worker 1",
                PREEMPTIONS,
            )
            delays = history.delays(replaced)
            print(f"\nTrainingRun worker, every mode, upstream backoff: replacement delays (s) {delays}")
            # Each replacement came from a fresh Job, which no backoff holds back however often it happens.
            assert history.not_in_fresh_jobs(replaced) == [], replaced
            assert len(running_pods(core, WORKERS)) == 2
        finally:
            history.stop()
            admin.close()
            api.close()


COORDINATOR = "app.kubernetes.io/name=pretrain,app.kubernetes.io/component=coordinator"
COORDINATOR_MODES = ("reboot-vm", "vm-only")
"""The repairs of the coordinator's standard node: one that keeps the node, one that replaces it (evicting the
only standard node without a replacement would leave the coordinator nowhere to go until ``pulumi up``)."""


def whole_gang(core: client.CoreV1Api) -> tuple[Any, list[Any]] | None:
    """The coordinator and both workers (ranks 0 and 1), all Running at once and none being deleted."""
    coordinators = running_pods(core, COORDINATOR)
    workers = running_pods(core, WORKERS)
    ranks = sorted(worker_rank(p) for p in workers)
    return (coordinators[0], workers) if len(coordinators) == 1 and ranks == [0, 1] else None


def test_a_training_run_survives_every_remediation_mode_of_a_worker_and_of_its_coordinator(
    tmp_path: Path,
) -> None:
    """Issue 32: each repair mode hits worker 0's node, and two modes hit the node of the gang's leader (the
    coordinator, which hosts the rendezvous store, on the standard node); after each the whole gang runs
    again (the coordinator and one pod per rank, never two of a rank) and no Job or JobSet failed. A kill of
    the coordinator (the reboot: exit 137) is one failure against its Job's retries; a drain is none."""
    with twin_stack(tmp_path, "twin-training", PROGRAM, API_KEY, options=TwinOptions(), speed=60) as stack:
        api = up(stack)
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        try:
            with fast_remediations(stack.emulator.admin):
                hits = [("worker", mode) for mode in REMEDIATION_MODES]
                hits += [("coordinator", mode) for mode in COORDINATOR_MODES]
                for member, mode in hits:
                    coordinator, workers = wait_for(lambda: whole_gang(core), "the whole gang to run")
                    victim = (
                        coordinator
                        if member == "coordinator"
                        else next(p for p in workers if worker_rank(p) == 0)
                    )
                    report = remediation_drill_twin(api, stack.emulator, API_KEY, victim.spec.node_name, mode)
                    assert report.ok, (member, mode, report)
                    ours = [w.outcome for w in report.workloads if w.namespace == "default"]
                    assert ours == [Outcome.SURVIVED], (member, mode, report)
                    again, workers_again = wait_for(
                        lambda: whole_gang(core), f"the whole gang to run again after {mode} of the {member}"
                    )
                    uids = {again.metadata.uid, *(p.metadata.uid for p in workers_again)}
                    assert victim.metadata.uid not in uids, (member, mode)
                    assert len(running_pods(core, WORKERS)) == 2, (member, mode)  # one pod per rank
                    assert failed_workloads(api) == [], (member, mode)
            # The coordinator's Job counted only the kill against its backoffLimit.
            failed = batch.read_namespaced_job_status("pretrain-coordinator", "default").status.failed
            assert (failed or 0) == sum(REMEDIATION_MODES[m] in NODE_KEEPING_MODES for m in COORDINATOR_MODES)
        finally:
            api.close()
