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

from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from together_clusters.cli.drill.modes import NODE_KEEPING_MODES, REMEDIATION_MODES
from together_clusters.cli.drill.report import Outcome
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.emulator.kubernetes.kwok_config import EXIT_CODE
from together_clusters.emulator.kubernetes.options import TwinOptions

from ._programs import TRAINER, checkpointed
from ._twin import (
    PodHistory,
    cluster_view,
    fast_remediations,
    job_set,
    job_set_condition,
    pods_of_job_set,
    preempt_again_and_again,
    remediation_drill_twin,
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


def finish_every_trial(api: Any, core: client.CoreV1Api, trials: list[str]) -> None:
    """Let every running trial pod end with exit 0, until each trial's JobSet completes; none failed."""

    def finished() -> bool:
        for pod in running_pods(core, "app.kubernetes.io/name=lr"):
            if EXIT_CODE not in (pod.metadata.annotations or {}):
                core.patch_namespaced_pod(
                    pod.metadata.name, "default", {"metadata": {"annotations": {EXIT_CODE: "0"}}}
                )
        return all(job_set_condition(api, t, "Completed") for t in trials)

    wait_for(finished, "every trial to finish", timeout=240)
    assert not any(job_set_condition(api, t, "Failed") for t in trials)


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
            finish_every_trial(api, core, trials)

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


def test_a_trial_survives_every_remediation_mode_of_its_node_and_every_trial_finishes(tmp_path: Path) -> None:
    """Issue 32: each repair mode hits trial 1's node (the other trials untouched), never two pods of the trial
    at once, and every trial still completes. A drain is one uncounted restart of the trial's JobSet; a kill
    (reboot, power cycle: exit 137) is replaced in place, one failure against the trial's retries."""
    with twin_stack(tmp_path, "twin-sweep", PROGRAM, API_KEY, options=TwinOptions(), speed=120) as stack:
        stack.set_config("rates", "[0.1, 0.2, 0.3]")
        api = up(stack)
        core = client.CoreV1Api(api)
        trials = ["lr-0", "lr-1", "lr-2"]
        try:
            wait_for(lambda: len(running_pods(core, "app.kubernetes.io/name=lr")) == 3, "three trials to run")
            with fast_remediations(stack.emulator.admin):
                drained = 0
                for mode, api_mode in REMEDIATION_MODES.items():
                    drained += api_mode not in NODE_KEEPING_MODES
                    before = wait_for(lambda: new_pod(core, "lr-1", None), "trial 1 to run")
                    report = remediation_drill_twin(api, stack.emulator, API_KEY, before.spec.node_name, mode)
                    ours = [w for w in report.workloads if (w.kind, w.name) == ("JobSet", "lr-1")]
                    assert [w.outcome for w in ours] == [Outcome.SURVIVED], (
                        f"{mode} of {before.spec.node_name} (pod {before.metadata.name}): {ours}\n"
                        f"{cluster_view(core, 'app.kubernetes.io/name=lr')}\n{report}"
                    )
                    wait_for(
                        partial(new_pod, core, "lr-1", before.metadata.uid),
                        f"trial 1 to run after {mode}",
                    )
                    assert len(running_pods(core, pods_of_job_set("lr-1"))) == 1, mode  # nothing runs twice
                    status = job_set(api, "lr-1").get("status") or {}
                    assert status.get("restarts", 0) == drained and not status.get(
                        "restartsCountTowardsMax"
                    ), (
                        mode,
                        status,
                    )
                    assert not any(job_set_condition(api, t, "Failed") for t in trials), mode
            assert [(job_set(api, t).get("status") or {}).get("restarts", 0) for t in ("lr-0", "lr-2")] == [
                0,
                0,
            ]

            finish_every_trial(api, core, trials)
        finally:
            api.close()
