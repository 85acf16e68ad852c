"""Issue 12's "time to replacement stays short however often a run is preempted", proven on the twin by its cause:
a BatchJob with ``fresh_job_per_attempt`` (a JobSet) deployed with a real ``pulumi up`` and drilled with
``together-clusters drill``, at the real controller settings (the Job controller's pod-failure backoff is
upstream's: 10 s, doubling, counting every failed pod), has each replacement made by a fresh Job, which has no
backoff to wait out. How long a replacement takes is the benchmark's to time (tests/bench, section 7's drill).

Oracles: the real JobSet and Job controllers' objects read with the ``kubernetes`` client, and kwok's container
timestamps for the delay from a preempted pod's end to its replacement's start. The drill's report is only
used to pick the preemptions that hit the run (and must name the JobSet, survived).

Run with ``-s`` to see the per-preemption replacement delays.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.modes import NODE_KEEPING_MODES, REMEDIATION_MODES
from together_clusters.cli.drill.report import Outcome
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.kwok_config import EXIT_CODE
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions

from ._programs import IMAGE, batch_job
from ._twin import (
    PodHistory,
    Stack,
    drill_twin,
    fast_remediations,
    job_set,
    job_set_condition,
    module_stack,
    pods_of_job_set,
    remediation_drill_twin,
    running_pod,
    running_pods,
    two_spare_nodes,
    up,
    wait_for,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-jobset-key-0123456789abcdef"
PREEMPTIONS = 5
# Beyond the 7th preemption, whose replacement a plain Job delays by 10 minutes at upstream settings.
MANY_PREEMPTIONS = 10
NON_RETRIABLE = 2

PROGRAM = batch_job(
    "jobset",
    f'ContainerSpec(image=config.get("image") or "{IMAGE}", command=("python", "-m", "train"), gpus=8)',
    f"retries=Retries(non_retriable_exit_codes=({NON_RETRIABLE},), fresh_job_per_attempt=True)",
)


# Speed 120: the 300 s grace lasts 2.5 s, a refill's bring-up 5 s (no process here needs the grace: the pods
# are kwok's). No job_pod_failure_backoff: the Job controller runs with upstream's backoff (real seconds,
# whatever the speed), which is what a fresh Job per attempt has to escape.
stack = module_stack("jobset", PROGRAM, API_KEY, TwinOptions(), speed=120)


def deploy(stack: Stack, job: str) -> client.ApiClient:
    stack.set_config("jobName", job)
    return up(stack)


def preempt_until_hit(
    stack: Stack, api: client.ApiClient, job: str, mode: TerminationMode, hits: int
) -> list[tuple[str, str]]:
    """Drill until ``hits`` preemptions took the run's pod; each one's (predecessor, replacement) pod uids."""
    core = client.CoreV1Api(api)
    admin = AdminClient(stack.emulator.base_url)
    replaced: list[tuple[str, str]] = []
    try:
        for _ in range(hits * 3):  # the platform reclaims the oldest node: not always the run's
            before = wait_for(lambda: running_pod(core, pods_of_job_set(job)), f"{job} to run").metadata.uid
            wait_for(lambda: two_spare_nodes(core), "two usable preemptible nodes")
            report = drill_twin(api, admin, stack.emulator.base_url, mode)
            ours = [w for w in report.workloads if (w.kind, w.name) == ("JobSet", job)]
            after = wait_for(
                lambda: running_pod(core, pods_of_job_set(job)), f"{job} to run again"
            ).metadata.uid
            if not ours:
                assert after == before, report  # the preemption did not touch the run
                continue
            (workload,) = ours
            assert workload.outcome is Outcome.SURVIVED and workload.seconds_to_replacement is not None
            assert after != before
            replaced.append((before, after))
            if len(replaced) == hits:
                return replaced
    finally:
        admin.close()
    raise AssertionError(f"only {len(replaced)} of {hits} preemptions hit {job}")


@pytest.mark.parametrize("mode", list(TerminationMode), ids=[m.value for m in TerminationMode])
def test_a_fresh_job_per_attempt_survives_five_preemptions_and_still_fails_on_a_non_retriable_code(
    stack: Stack, mode: TerminationMode
) -> None:
    job = f"fresh-{mode.value}"
    api = deploy(stack, job)
    history = PodHistory(api, "default", pods_of_job_set(job)).start()
    core = client.CoreV1Api(api)
    try:
        replaced = preempt_until_hit(stack, api, job, mode, PREEMPTIONS)
        print(f"\nJobSet, {mode.value}: replacement delays (s) {history.delays(replaced)}")
        # Each preemption was one restart of the JobSet (a fresh Job), none counted against its limit.
        status = job_set(api, job).get("status") or {}
        assert status.get("restarts") == PREEMPTIONS, status
        assert not status.get("restartsCountTowardsMax"), status
        assert job_set_condition(api, job, "Failed") is None

        # A non-retriable exit code still ends the run at once: the JobSet fails instead of restarting.
        pod = running_pod(core, pods_of_job_set(job))
        core.patch_namespaced_pod(
            pod.metadata.name, "default", {"metadata": {"annotations": {EXIT_CODE: str(NON_RETRIABLE)}}}
        )
        failed = wait_for(lambda: job_set_condition(api, job, "Failed"), f"JobSet {job} to fail")
        assert (job_set(api, job).get("status") or {}).get("restarts") == PREEMPTIONS, failed
        job_failure = client.BatchV1Api(api).read_namespaced_job_status(f"{job}-attempt-0", "default")
        reasons = {c.reason for c in job_failure.status.conditions or [] if c.type == "Failed"}
        assert reasons and "PodFailurePolicy" not in reasons, reasons
    finally:
        history.stop()
        api.close()


def test_at_real_settings_even_the_tenth_replacement_comes_from_a_fresh_job(
    stack: Stack,
) -> None:
    job = "fresh-many"
    api = deploy(stack, job)
    history = PodHistory(api, "default", pods_of_job_set(job)).start()
    try:
        replaced = preempt_until_hit(stack, api, job, TerminationMode.EVICTION, MANY_PREEMPTIONS)
        print(f"\nJobSet, eviction, upstream backoff: replacement delays (s) {history.delays(replaced)}")
        # Each replacement came from a fresh Job, which no backoff holds back however often it happens.
        assert history.not_in_fresh_jobs(replaced) == [], replaced
        assert (job_set(api, job).get("status") or {}).get("restarts") == MANY_PREEMPTIONS
    finally:
        history.stop()
        api.close()


def test_a_changed_image_replaces_the_job_set_and_the_run_goes_on_with_it(stack: Stack) -> None:
    """A JobSet's replicated Jobs are immutable (its webhook refuses the patch): an update must replace it."""
    job = "fresh-changed"
    api = deploy(stack, job)
    core = client.CoreV1Api(api)
    try:
        old = wait_for(lambda: running_pod(core, pods_of_job_set(job)), f"{job} to run")
        stack.set_config("image", "registry.invalid/train:2")
        up(stack).close()
        template = job_set(api, job)["spec"]
        [replicated] = template["replicatedJobs"]
        [main] = replicated["template"]["spec"]["template"]["spec"]["containers"]
        assert main["image"] == "registry.invalid/train:2"

        def new_pod() -> Any:
            pod = running_pod(core, pods_of_job_set(job))
            return pod if pod is not None and pod.metadata.uid != old.metadata.uid else None

        pod = wait_for(new_pod, f"{job} to run the new image")
        assert pod.spec.containers[0].image == "registry.invalid/train:2"
    finally:
        stack.set_config("image", IMAGE)
        api.close()


def test_a_fresh_job_per_attempt_survives_every_remediation_mode_of_its_node_and_completes_once(
    stack: Stack,
) -> None:
    """Issue 32: each repair mode hits the run's pod, never two pods at once, and the run still completes once.
    A drained pod saves and exits 143: one uncounted restart of the JobSet (a fresh Job). A pod a reboot or
    power cycle kills exits 137: its Job replaces it in place, one failure against the attempt's retries (the
    gate drains first to avoid that)."""
    job = "fresh-remediated"
    api = deploy(stack, job)
    core = client.CoreV1Api(api)
    try:
        with fast_remediations(stack.emulator.admin):
            drained = 0
            for mode, api_mode in REMEDIATION_MODES.items():
                drained += api_mode not in NODE_KEEPING_MODES
                before = wait_for(lambda: running_pod(core, pods_of_job_set(job)), f"{job} to run")
                report = remediation_drill_twin(api, stack.emulator, API_KEY, before.spec.node_name, mode)
                ours = [w.outcome for w in report.workloads if (w.kind, w.name) == ("JobSet", job)]
                assert ours == [Outcome.SURVIVED], (mode, report)
                after = wait_for(
                    lambda: running_pod(core, pods_of_job_set(job)), f"{job} to run again after {mode}"
                )
                assert after.metadata.uid != before.metadata.uid, mode
                assert len(running_pods(core, pods_of_job_set(job))) == 1, mode  # nothing runs twice
                status = job_set(api, job).get("status") or {}
                assert job_set_condition(api, job, "Failed") is None, (mode, status)
                # One restart per drained repair, none counted towards the JobSet's limit.
                assert status.get("restarts", 0) == drained and not status.get("restartsCountTowardsMax"), (
                    mode,
                    status,
                )

        pod = running_pod(core, pods_of_job_set(job))
        core.patch_namespaced_pod(
            pod.metadata.name, "default", {"metadata": {"annotations": {EXIT_CODE: "0"}}}
        )
        wait_for(lambda: job_set_condition(api, job, "Completed"), f"JobSet {job} to complete")
        assert job_set_condition(api, job, "Failed") is None
        assert (job_set(api, job).get("status") or {}).get("restarts") == drained == 3
    finally:
        api.close()
