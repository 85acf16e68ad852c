"""Issue 12's proof on the twin: a BatchJob as a plain Job (``fresh_job_per_attempt=False``) deployed with a real
``pulumi up`` (no renderYamlTo), then drilled with ``together-clusters drill`` in every termination mode the
twin can produce. (The default, a JobSet with a fresh Job per attempt: test_engine_jobset.py.) Run with ``-s``
to see the replacement delays, which grow with the Job controller's backoff.

Oracles: the real Job controller's conditions read with the ``kubernetes`` client; the drill's own report is
only used to pick the preemptions that hit the Job.
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

from ._programs import TRAINER, batch_job
from ._twin import (
    PodHistory,
    Stack,
    drill_twin,
    fast_remediations,
    module_stack,
    remediation_drill_twin,
    running_pod,
    running_pods,
    two_spare_nodes,
    up,
    wait_for,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-drills-key-0123456789abcdef"
PREEMPTIONS = 5
NON_RETRIABLE = 2

PROGRAM = batch_job(
    "drills",
    TRAINER,
    f"retries=Retries(non_retriable_exit_codes=({NON_RETRIABLE},), fresh_job_per_attempt=False)",
)


# Speed 120: the 300 s grace lasts 2.5 s, a refill's bring-up 5 s (no process here needs the grace: the pods
# are kwok's). The Job controller's first pod-failure backoff is 1 s instead of 10 (it still doubles with every
# failure, ignored ones included).
stack = module_stack("drills", PROGRAM, API_KEY, TwinOptions(job_pod_failure_backoff="1s"), speed=120)


def job_condition(batch: client.BatchV1Api, name: str, kind: str) -> Any:
    status = batch.read_namespaced_job_status(name, "default").status
    return next((c for c in status.conditions or [] if c.type == kind and c.status == "True"), None)


@pytest.mark.parametrize("mode", list(TerminationMode), ids=[m.value for m in TerminationMode])
def test_a_batch_job_survives_five_preemptions_and_still_fails_on_a_non_retriable_code(
    stack: Stack, mode: TerminationMode
) -> None:
    job = f"train-{mode.value}"  # a new Job per mode: each starts with the controller's backoff at zero
    stack.set_config("jobName", job)
    api = up(stack)
    selector = f"job-name={job}"
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    admin = AdminClient(stack.emulator.base_url)
    history = PodHistory(api, "default", selector).start()
    try:
        wait_for(lambda: running_pod(core, selector), f"{job} to run")
        hits, delays = 0, []
        for _ in range(PREEMPTIONS * 2):  # the platform reclaims the oldest node: not always the Job's
            before = running_pod(core, selector).metadata.uid
            wait_for(lambda: two_spare_nodes(core), "two usable preemptible nodes")
            report = drill_twin(api, admin, stack.emulator.base_url, mode)
            hit = sum((w.kind, w.name) == ("Job", job) for w in report.workloads)
            after = wait_for(lambda: running_pod(core, selector), f"{job} to run again").metadata.uid
            if hit:
                hits += hit
                delays.append(history.delay(before, after))
            if hits == PREEMPTIONS:
                break
        assert hits == PREEMPTIONS
        print(f"\nplain Job, {mode.value}, first backoff 1s: replacement delays (s) {delays}")
        assert job_condition(batch, job, "Failed") is None

        # A non-retriable exit code still ends the Job at once, after all those ignored failures.
        pod = running_pod(core, selector)
        annotations = {"metadata": {"annotations": {EXIT_CODE: str(NON_RETRIABLE)}}}
        core.patch_namespaced_pod(pod.metadata.name, "default", annotations)
        failed = wait_for(lambda: job_condition(batch, job, "Failed"), f"{job} to fail")
        assert failed.reason == "PodFailurePolicy", failed
    finally:
        history.stop()
        admin.close()
        api.close()


def test_a_batch_job_survives_every_remediation_mode_of_its_node_and_completes_once(stack: Stack) -> None:
    """Issue 32: each repair mode hits the Job's running pod; none fails the Job, never two pods at once, and
    the Job still completes once. A drained pod saves and exits 143 (ignored); a pod a reboot or power cycle
    kills exits 137 and is one failure against the Job's retries (the gate drains first to avoid that)."""
    job = "train-remediated"
    stack.set_config("jobName", job)
    api = up(stack)
    selector = f"job-name={job}"
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    try:
        killed = 0
        with fast_remediations(stack.emulator.admin):
            for mode, api_mode in REMEDIATION_MODES.items():
                killed += api_mode in NODE_KEEPING_MODES
                before = wait_for(lambda: running_pod(core, selector), f"{job} to run")
                report = remediation_drill_twin(api, stack.emulator, API_KEY, before.spec.node_name, mode)
                ours = [w.outcome for w in report.workloads if (w.kind, w.name) == ("Job", job)]
                assert ours == [Outcome.SURVIVED], (mode, report)
                after = wait_for(lambda: running_pod(core, selector), f"{job} to run again after {mode}")
                assert after.metadata.uid != before.metadata.uid, mode
                assert len(running_pods(core, selector)) == 1, mode  # nothing runs twice
                assert job_condition(batch, job, "Failed") is None, (
                    mode,
                    batch.read_namespaced_job_status(job, "default").status,
                )
        # The Job controller's own count: only the kills were failures against backoffLimit.
        assert (batch.read_namespaced_job_status(job, "default").status.failed or 0) == killed == 2

        pod = running_pod(core, selector)
        core.patch_namespaced_pod(
            pod.metadata.name, "default", {"metadata": {"annotations": {EXIT_CODE: "0"}}}
        )
        wait_for(lambda: job_condition(batch, job, "Complete"), f"{job} to complete")
        status = batch.read_namespaced_job_status(job, "default").status
        assert (status.succeeded, status.failed or 0) == (1, killed), status
    finally:
        api.close()
