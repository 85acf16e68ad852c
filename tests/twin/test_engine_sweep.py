"""A Sweep deployed with a real ``pulumi up`` onto the twin, at the real controller settings (upstream's Job
backoff): one trial preempted again and again, in every termination mode, is replaced by a fresh Job each
time, which has no failure backoff to wait out however often (how long one takes is the benchmark's to time,
section 7's drill); every trial finishes; a changed trial parameter replaces that trial's JobSet only, under
a new checkpoint key.

Oracles: the real JobSet and Job controllers' objects read with the ``kubernetes`` client, kwok's container
timestamps for each replacement delay. The drill only picks the node (the one running the trial) and must
name that trial's JobSet, survived.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.report import Outcome
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.kwok_config import EXIT_CODE
from together_clusters.emulator.kubernetes.options import TwinOptions

from ._programs import TRAINER, checkpointed
from ._twin import (
    PodHistory,
    job_set,
    job_set_condition,
    pods_of_job_set,
    preempt_again_and_again,
    running_pod,
    running_pods,
    twin_stack,
    up,
    wait_for,
)

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-sweep-key-0123456789abcdef"
# An Indexed Job's 6th replacement of one index waits 320 s at upstream settings (10 s doubling).
PREEMPTIONS = 6

PROGRAM = checkpointed(
    "sweep",
    24,
    "sweep-checkpoints",
    f"""\
rates = json.loads(config.require("rates"))
sweep = Sweep(
    "lr",
    SweepArgs(
        container={TRAINER},
        trials=tuple({{"learning_rate": r}} for r in rates),
        checkpoint=store.storage,
        sweep_name="lr",
        pod=PodSettings(namespace="default"),
    ),
    opts=gpu.opts(store),
)
pulumi.export("job_sets", sweep.job_sets)""",
)


def checkpoint_dir(api: client.ApiClient, name: str) -> str:
    (replicated,) = job_set(api, name)["spec"]["replicatedJobs"]
    (main,) = replicated["template"]["spec"]["template"]["spec"]["containers"]
    return str(next(e["value"] for e in main["env"] if e["name"] == "CHECKPOINT_DIR"))


def new_pod(core: client.CoreV1Api, trial: str, old_uid: str | None) -> Any:
    return next((p for p in running_pods(core, pods_of_job_set(trial)) if p.metadata.uid != old_uid), None)


def test_a_trial_preempted_again_and_again_is_replaced_by_a_fresh_job_and_every_trial_finishes(
    tmp_path: Path,
) -> None:
    # Speed 120: the 300 s grace lasts 2.5 s, a refill's bring-up 5 s (no process here needs the grace: the
    # pods are kwok's). No job_pod_failure_backoff: the Job controller's backoff is upstream's (real seconds,
    # whatever the speed), which a trial's fresh Job per attempt has to escape.
    with twin_stack(tmp_path, "twin-sweep", PROGRAM, API_KEY, options=TwinOptions(), speed=120) as stack:
        stack.set_config("rates", "[0.1, 0.2, 0.3]")
        api = up(stack)
        core = client.CoreV1Api(api)
        admin = AdminClient(stack.emulator.base_url)
        trials = ["lr-0", "lr-1", "lr-2"]
        history = PodHistory(api, "default", "app.kubernetes.io/name=lr").start()
        try:
            wait_for(lambda: len(running_pods(core, "app.kubernetes.io/name=lr")) == 3, "three trials to run")
            uids = {t: job_set(api, t)["metadata"]["uid"] for t in trials}

            replaced, reports = preempt_again_and_again(
                api,
                admin,
                stack.emulator.base_url,
                lambda not_uid: new_pod(core, "lr-1", not_uid),
                "trial 1",
                PREEMPTIONS,
            )
            for report in reports:  # each drill took trial 1's pod, and its JobSet survived
                (ours,) = [w for w in report.workloads if (w.kind, w.name) == ("JobSet", "lr-1")]
                assert ours.outcome is Outcome.SURVIVED, report
            delays = history.delays(replaced)
            print(f"\nSweep trial, every mode, upstream backoff: replacement delays (s) {delays}")
            # Each replacement came from a fresh Job, which no backoff holds back however often it happens.
            assert history.not_in_fresh_jobs(replaced) == [], replaced
            status = job_set(api, "lr-1")["status"]
            assert status.get("restarts") == PREEMPTIONS and not status.get("restartsCountTowardsMax"), status

            # Every trial finishes: its JobSet completes, none failed, the preempted one included.
            def finished() -> bool:
                for pod in running_pods(core, "app.kubernetes.io/name=lr"):
                    if EXIT_CODE not in (pod.metadata.annotations or {}):
                        core.patch_namespaced_pod(
                            pod.metadata.name, "default", {"metadata": {"annotations": {EXIT_CODE: "0"}}}
                        )
                return all(job_set_condition(api, t, "Completed") for t in trials)

            wait_for(finished, "every trial to finish", timeout=240)
            assert not any(job_set_condition(api, t, "Failed") for t in trials)

            keys = {t: checkpoint_dir(api, t) for t in trials}
            stack.set_config("rates", "[0.1, 0.25, 0.3]")
            up(stack).close()
            # Only the changed trial's JobSet is replaced, under a key no checkpoint was saved under.
            assert {t: job_set(api, t)["metadata"]["uid"] == uids[t] for t in trials} == {
                "lr-0": True,
                "lr-1": False,
                "lr-2": True,
            }
            assert checkpoint_dir(api, "lr-0") == keys["lr-0"] and checkpoint_dir(api, "lr-2") == keys["lr-2"]
            assert checkpoint_dir(api, "lr-1") != keys["lr-1"]
            wait_for(lambda: running_pod(core, pods_of_job_set("lr-1")), "the changed trial to run afresh")
        finally:
            history.stop()
            admin.close()
            api.close()
