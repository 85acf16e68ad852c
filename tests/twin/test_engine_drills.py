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

from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.kwok_config import EXIT_CODE
from together_clusters.emulator.kubernetes.options import TerminationMode, TwinOptions

from ._programs import TRAINER, batch_job
from ._twin import PodHistory, Stack, drill_twin, module_stack, running_pod, two_spare_nodes, up, wait_for

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
