"""A seeded kill campaign over a whole stack on the twin, through the real engine (issue 41, part 1).

The stack is what users compose: a ``Volume`` and the cluster on it, ``provider_for`` the cluster with
``ClusterControllers`` (JobSet and Kueue from their charts), a ``WorkloadQueue`` following the cluster, a
``CheckpointStore`` on the volume, a ``BatchJob``, a ``Sweep`` and a ``TrainingRun`` submitted to the queue,
and a ``RemediationGate`` holding the API key. For each seed, ``pulumi up`` is SIGKILLed (with every process it
started, its plugins included: they run in process groups of their own) after a number of the engine's
resource events drawn from the seed, between 1 and the count of a clean ``up``; then the user's fix: ``pulumi
cancel`` (the lock a killed run leaves) and ``pulumi up`` again (and, if the engine names pending operations,
``pulumi refresh --clear-pending-creates``, then ``up``). Then an update of a kind drawn from the seed (a scale
of the cluster from 0 to 8 preemptible GPUs that the queue's quota follows; a new trial of the Sweep; a change
of the Kueue chart's values) is killed among its changing steps and rerun. Then ``pulumi destroy`` is killed
the same way as the up and rerun.

Checked against the live cluster and the emulator, not the state: each rerun succeeds with no Server-Side
Apply conflict; every Kubernetes object the state records exists live, each of them once (an object named by
the engine, with a random suffix, has no twin left by the killed run); the JobSets live are the ones the state
records, the BatchJob's with one Job; the state holds the gate's API key only encrypted; one cluster and one
volume, both tracked; each workload's pod (a JobSet's, the TrainingRun coordinator Job's) ran once, never two
at once, through the update too; the update's rerun leaves the same cluster (none replaced, none added) with
the change made (the new target and the queue's quota following it, the new trial's JobSet, Kueue's new
configuration); after the destroy's rerun the state is empty, the emulator has no live cluster of the stack
(nothing left running, nothing paid for twice) and the volume is kept, once (its data is the user's).

Seeds: two fixed ones and one drawn fresh each run, printed (``KILL_CAMPAIGN_FRESH_SEED=<seed>`` replays it;
``KILL_CAMPAIGN_SEEDS=1,2,3`` runs others instead of the fixed ones), as the fault campaign does. Each run
reports its seed, the kill points reached (the event count, the part of the stack and the resources in
flight) and its outcome, in the run's "campaign reports" summary (under xdist too: tests/_reports.py). About
a minute and a half a seed on 2 cores alone (the module: 4:34 for the three), 2:30 in a full run: so few
runs.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests import _engine
from together_clusters.emulator.server import RunningEmulator
from together_clusters.platform import GPU_RESOURCE, JOB_NAME_LABEL, JOBSET_API, JOBSET_NAME_LABEL
from together_clusters.platform.charts import KUEUE, KUEUE_API_VERSION

from ._kill import (
    CHARTS,
    SINGLE_ADOPTION,
    KilledProject,
    Outcome,
    RunningPods,
    campaign_emulator,
    converged,
    recorded_object_violations,
    seed_of,
)
from ._programs import TRAINER
from ._twin import DRIVER, GPU, REGION, kube_clients

pytestmark = [pytest.mark.engine, pytest.mark.twin]
API_KEY = "tgp_v1_twin-kill-campaign-0123456789abcdef"
JOB = "train"
SWEEP = "lr"
RUN = "pretrain"
POD_SELECTOR = f"{JOBSET_NAME_LABEL}={JOB}"
# Seed 2988 kills the up while the Cluster is being created (a cluster the rerun must adopt, as its error
# says), the update while the Cluster is being scaled, and the destroy among Kueue's chart objects (it replaced
# seed 17975 when the TrainingRun joined the stack: with the clean run's counts grown by its events, 17975's
# destroy fell between the last steps). Seed 4007 kills the up around event 36, among JobSet's chart objects
# and the gate's, the update among Kueue's chart objects whose values changed, and the destroy while the
# cluster is being deleted. The engine runs independent steps in parallel, so what is in flight at an event
# varies: in two of three runs on 6 December jobset-mutating-webhook-configuration was, and with the charts'
# forced apply reverted (``kube.with_forced_apply`` left out of ClusterControllers' transform) the rerun of
# such a run fails with a Server-Side Apply conflict on it.
FIXED_SEEDS = (2988, 4007)

# Resource events (a step's start and its outputs) of a clean run of PROGRAM, measured: the kill is drawn
# between the first and the last of them. A run that ends before its kill point counts as "completed".
UP_EVENTS = 250
DESTROY_EVENTS = 254
# Each kind of update: the events of its steps that change something, measured on a clean update (a scale: the
# Cluster's update, then the ClusterQueue whose quota follows it; a new trial: its JobSet, and the ClusterQueue;
# the chart's values: Kueue's ConfigMap replaced, its Deployment updated). The kill is drawn among them, so it
# hits the change rather than the update's two hundred unchanged steps.
UPDATE_CHANGES = {"scale": 4, "trial": 4, "chart": 8}
STANDARD_GPUS = 8
SCALED_PREEMPTIBLE_GPUS = 8
# Each kind of update, as the stack's config makes it: a scale; a new trial of the Sweep; a change of the Kueue
# chart's values (its configuration, rolled out by SSA over the chart's objects: the nearest to a chart version
# bump here, where only the pinned charts are served).
UPDATES = {
    "scale": ("preemptibleGpus", str(SCALED_PREEMPTIBLE_GPUS)),
    "trial": ("trials", "2"),
    "chart": ("podsReadyTimeoutSeconds", "300"),
}

PROGRAM = f"""\
import os

import pulumi

from together_clusters.components import (
    BatchJob, BatchJobArgs, CheckpointStore, CheckpointStoreArgs, ClusterControllersArgs, ComputeClass,
    KueueSettings, NodePlacement, PodSettings, RemediationGate, RemediationGateArgs, SharedVolume, Sweep, SweepArgs,
    TrainingRun, TrainingRunArgs, WorkloadQueue, WorkloadQueueArgs, provider_for,
)
from together_clusters.components import ContainerSpec
from together_clusters.provider import Cluster, ClusterArgs, Volume, VolumeArgs

config = pulumi.Config()
name = config.require("clusterName")
volume = Volume("checkpoints", VolumeArgs(volume_name=f"{{name}}-ckpt", region={REGION!r}, size_tib=1))
cluster = Cluster("gpu", ClusterArgs(cluster_name=name, region={REGION!r},
                                     gpu_type={GPU!r}, num_gpus={STANDARD_GPUS}, nvidia_version_id={DRIVER!r},
                                     num_preemptible_gpus=config.get_int("preemptibleGpus") or 0,
                                     volume_id=volume.volume_id,
                                     ready_timeout_minutes=5, adopt_cluster_id=config.get("adoptClusterId")))
kueue = KueueSettings(pods_ready_timeout_seconds=config.get_int("podsReadyTimeoutSeconds") or 600)
provider = provider_for(cluster, controllers=ClusterControllersArgs(kueue=True, chart_source={str(CHARTS)!r},
                                                                    kueue_settings=kueue))
on_cluster = pulumi.ResourceOptions(provider=provider)
queue = WorkloadQueue("queue", WorkloadQueueArgs.following(cluster), opts=on_cluster)
store = CheckpointStore("ckpt", CheckpointStoreArgs(storage=SharedVolume(claim_name="ckpt", size="1Ti")),
                        opts=on_cluster, volume_name=f"{{name}}-ckpt")
BatchJob({JOB!r}, BatchJobArgs(container={TRAINER}, checkpoint=None, job_name={JOB!r},
                              pod=PodSettings(namespace="default"),
                              placement=NodePlacement(ComputeClass.STANDARD), queue=queue),
         opts=on_cluster)
# Preemptible only: its trials wait in the queue until the scale brings preemptible quota (the BatchJob keeps
# the standard node), so whichever Kueue admits first, the BatchJob runs.
Sweep({SWEEP!r}, SweepArgs(container={TRAINER}, checkpoint=store.storage, sweep_name={SWEEP!r},
                          trials=tuple({{"learning_rate": 10 ** -(3 + i)}} for i in range(config.get_int("trials") or 1)),
                          pod=PodSettings(namespace="default"),
                          placement=NodePlacement(ComputeClass.PREEMPTIBLE), queue=queue),
      opts=pulumi.ResourceOptions(provider=provider, depends_on=[store]))
# Its coordinator (no GPU) beside the BatchJob on the standard node; its one worker, preemptible, waits in the
# queue like the trials.
trainer = {TRAINER}
TrainingRun({RUN!r}, TrainingRunArgs(coordinator=ContainerSpec(image=trainer.image, command=("coordinator",)),
                                    worker=trainer, num_workers=1, checkpoint=store.storage, run_name={RUN!r},
                                    pod=PodSettings(namespace="default"), queue=queue),
            opts=pulumi.ResourceOptions(provider=provider, depends_on=[store]))
RemediationGate("gate", RemediationGateArgs(
    cluster_id=cluster.id, modes=["reboot-vm"], image="registry.invalid/remediation-gate:1",
    api_key=pulumi.Output.secret(os.environ["TOGETHER_API_KEY"]), base_url=os.environ["TOGETHER_BASE_URL"]),
    opts=on_cluster)
pulumi.export("kube_config", cluster.kube_config)
"""


# Which part of the stack a kill hit: the first of these found in a resource in flight (type::name).
PHASES = (
    ("Cluster::gpu", "cluster"),
    ("Volume::checkpoints", "volume"),
    (":k8s-controllers", "charts"),
    ("::queue", "queue"),
    (f"::{JOB}", "workload"),
    (f"::{SWEEP}", "sweep"),
    ("::gate", "gate"),
    ("::ckpt", "checkpoint store"),
)


@dataclass
class KillStack(KilledProject):
    """One seed's stack of PROGRAM (own project and state, own cluster name) on the module's emulator."""

    emulator: RunningEmulator
    name: str

    def __post_init__(self) -> None:
        super().__post_init__()
        self.run("config", "set", "clusterName", self.name, check=True)

    @classmethod
    def on(cls, tmp: Path, emulator: RunningEmulator, name: str) -> KillStack:
        extra = {"TOGETHER_BASE_URL": emulator.base_url, "TOGETHER_API_KEY": API_KEY}
        return cls(tmp, "kill-campaign", PROGRAM, extra, PHASES, SINGLE_ADOPTION, emulator, name)

    def live_clusters(self) -> list[dict[str, Any]]:
        return [
            c
            for c in self.emulator.admin.clusters()
            if c.get("cluster_name") == self.name and c.get("status") != "Deleting"
        ]

    def live_volumes(self) -> list[str]:
        """The ids of the live shared volumes of the stack's ``Volume``."""
        return [
            v["volume_id"]
            for v in self.emulator.admin.volumes()
            if v.get("volume_name") == f"{self.name}-ckpt"
        ]

    def api(self) -> client.ApiClient | None:
        live = self.live_clusters()
        if not live or not live[0].get("kube_config"):
            return None
        return kube_clients(live[0]["kube_config"])


class PodWatch(RunningPods):
    """The workloads' pods all along: per JobSet (the BatchJob's, each trial's, the TrainingRun's workers: one pod
    each) and per plain Job (the TrainingRun's coordinator). Keys: ``JobSet <name>`` and ``Job <name>``."""

    def __init__(self, stack: KillStack) -> None:
        super().__init__(lambda: {"cluster": api} if (api := stack.api()) else {}, workload_of)

    def violations(self) -> list[str]:
        """Each workload in one pod at most, never two at once (nothing here disrupts a pod); the BatchJob and
        the TrainingRun's coordinator started."""
        found = [
            f"{workload}'s pod ran as {sorted(self.ran(workload))} (at most {self.most_at_once[workload]} at "
            "once), expected one pod"
            for workload in sorted(self.pods)
            if len(self.ran(workload)) != 1 or self.most_at_once[workload] != 1
        ]
        for started in (f"JobSet {JOB}", f"Job {RUN}-coordinator"):
            if not self.ran(started):
                found.append(f"the {started} never ran")
        return found


def workload_of(labels: dict[str, str]) -> str:
    """What a pod runs for, by its labels: its JobSet, else its Job."""
    if JOBSET_NAME_LABEL in labels:
        return f"JobSet {labels[JOBSET_NAME_LABEL]}"
    return f"Job {labels.get(JOB_NAME_LABEL, '?')}"


def live_violations(stack: KillStack) -> list[str]:
    """What the live cluster holds against the state: each Kubernetes object recorded exists live, once; the
    BatchJob is one JobSet of one Job."""
    live = stack.live_clusters()
    resources = _engine.stack_resources(stack.dir, stack.env)
    tracked = [r["id"] for r in resources if r["type"].endswith(":Cluster")]
    if [c["cluster_id"] for c in live] != tracked or len(tracked) != 1:
        # Paid for twice, or running untracked.
        return [f"live clusters {[c['cluster_id'] for c in live]}, the state tracks {tracked}"]
    volumes = [r["id"] for r in resources if r["type"].endswith(":Volume")]
    if (live_volumes := stack.live_volumes()) != volumes or len(volumes) != 1:
        return [f"live volumes {live_volumes}, the state tracks {volumes}"]
    api = stack.api()
    if api is None:
        return ["the live cluster has no kubeconfig"]
    found = recorded_object_violations(resources, lambda _: api)
    live_job_sets = job_sets_in_default(api)
    recorded = sorted(
        r["outputs"]["metadata"]["name"]
        for r in resources
        if r["type"].endswith(":JobSet") and r.get("outputs")
    )
    if live_job_sets != recorded or JOB not in recorded:
        found.append(f"JobSets in default: {live_job_sets}, the state records {recorded}")
    # The JobSet controller makes the Job a moment after an up that just created the JobSet: wait for one, then
    # count them (a second would be a duplicate).
    batch = client.BatchV1Api(api)
    deadline = time.monotonic() + 60
    while not (jobs := batch.list_namespaced_job("default", label_selector=POD_SELECTOR).items):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if len(jobs) != 1:
        found.append(f"{len(jobs)} Jobs of the JobSet {JOB}: {[j.metadata.name for j in jobs]}")
    return found


def job_sets_in_default(api: client.ApiClient) -> list[str]:
    """The names of the live JobSets in the workloads' namespace, sorted."""
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        JOBSET_API.group, JOBSET_API.version, "default", JOBSET_API.plural
    )
    return sorted(j["metadata"]["name"] for j in listed["items"])


def gpu_quota(api: client.ApiClient) -> int:
    """The GPUs the live ClusterQueues admit, summed over their flavors."""
    queues = client.CustomObjectsApi(api).list_cluster_custom_object(
        *KUEUE_API_VERSION.split("/"), "clusterqueues"
    )["items"]
    return sum(
        int(str(resource["nominalQuota"]))
        for queue in queues
        for group in queue["spec"]["resourceGroups"]
        for flavor in group["flavors"]
        for resource in flavor["resources"]
        if resource["name"] == GPU_RESOURCE
    )


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    with campaign_emulator() as running:
        yield running


def _seeds() -> list[Any]:
    fixed = [int(s) for s in os.environ.get("KILL_CAMPAIGN_SEEDS", "").split(",") if s.strip()] or FIXED_SEEDS
    return [*fixed, "fresh"]


def update_killed(stack: KillStack, outcome: Outcome, seed: int) -> None:
    """An update of the seed's kind, killed among its steps that change something, then rerun: ``scale``, the
    cluster from 0 to SCALED_PREEMPTIBLE_GPUS preemptible GPUs, the queue's quota following it; ``trial``, a
    second trial of the Sweep; ``chart``, a new PodsReady timeout in the Kueue chart's values. The same cluster
    afterwards (none added, none replaced) and the change made."""
    # Its own draw: the up's and the destroy's stay as they were.
    rng = random.Random(f"kill-campaign:{seed}:update")
    kind = rng.choice(sorted(UPDATE_CHANGES))
    before = [c["cluster_id"] for c in stack.live_clusters()]
    key, value = UPDATES[kind]
    stack.run("config", "set", key, value, check=True)
    outcome.kills.append(
        stack.killed("up", UPDATE_CHANGES[kind], rng, changes_only=True, label=f"update ({kind})")
    )
    proc, how = stack.rerun("up")
    outcome.steps.append(f"update ({kind}) {how}: exit {proc.returncode}")
    if failed := converged(proc, "the update"):
        outcome.violations += failed
        return
    outcome.violations += live_violations(stack) + secret_violations(stack)
    live = stack.live_clusters()
    if [c["cluster_id"] for c in live] != before:
        outcome.violations.append(f"the update left clusters {[c['cluster_id'] for c in live]}, was {before}")
        return
    api = stack.api()
    if kind == "scale":
        if live[0].get("desired_preemptible_gpus") != SCALED_PREEMPTIBLE_GPUS:
            outcome.violations.append(
                f"the cluster's preemptible target is {live[0].get('desired_preemptible_gpus')}"
            )
        scaled = STANDARD_GPUS + SCALED_PREEMPTIBLE_GPUS
        if api is not None and (quota := gpu_quota(api)) != scaled:
            outcome.violations.append(f"the queue admits {quota} GPUs, not the scaled cluster's {scaled}")
    elif kind == "chart" and api is not None:
        configs = client.CoreV1Api(api).list_namespaced_config_map(KUEUE.namespace).items
        if not any("timeout: 300s" in value for c in configs for value in (c.data or {}).values()):
            outcome.violations.append("Kueue's configuration does not have the new PodsReady timeout (300s)")
    elif kind == "trial" and api is not None:
        trials = [name for name in job_sets_in_default(api) if name.startswith(f"{SWEEP}-")]
        if len(trials) != 2:
            outcome.violations.append(f"the Sweep's JobSets after the new trial: {trials}, expected two")


def secret_violations(stack: KillStack) -> list[str]:
    """The API key the gate holds is in the state only encrypted."""
    exported = json.dumps(_engine.stack_export(stack.dir, stack.env))
    return ["the state holds the API key in plain text"] if API_KEY in exported else []


@pytest.mark.parametrize("seed", _seeds(), ids=lambda s: f"seed-{s}")
def test_a_stack_killed_anywhere_converges_on_rerun(
    emulator: RunningEmulator, tmp_path: Path, seed: Any, campaign_report: Callable[[str], None]
) -> None:
    seed, replay = seed_of(seed, "KILL_CAMPAIGN_FRESH_SEED")
    rng = random.Random(f"kill-campaign:{seed}")
    outcome = Outcome(seed)
    stack = KillStack.on(tmp_path, emulator, f"kill-{seed}")
    try:
        with PodWatch(stack) as pods:
            outcome.kills.append(stack.killed("up", UP_EVENTS, rng))
            proc, how = stack.rerun("up")
            outcome.steps.append(f"up {how}: exit {proc.returncode}")
            if failed := converged(proc, "the up"):
                outcome.violations += failed
            else:
                outcome.violations += live_violations(stack) + secret_violations(stack)
                # The BatchJob started (Kueue admitted it, the twin runs it) and the TrainingRun's coordinator,
                # each in one pod, never two at once.
                started = (f"JobSet {JOB}", f"Job {RUN}-coordinator")
                deadline = time.monotonic() + 60
                while not all(pods.ran(s) for s in started) and time.monotonic() < deadline:
                    time.sleep(0.3)
                update_killed(stack, outcome, seed)
        outcome.violations += pods.violations()
        ran = {workload: len(pods.ran(workload)) for workload in sorted(pods.pods)}
        outcome.steps.append(f"workload pods that ran, per JobSet: {ran}")

        outcome.kills.append(stack.killed("destroy", DESTROY_EVENTS, rng))
        proc, how = stack.rerun("destroy")
        outcome.steps.append(f"destroy {how}: exit {proc.returncode}")
        outcome.violations += converged(proc, "the destroy")
        left = _engine.stack_resources(stack.dir, stack.env)
        if left:
            outcome.violations.append(
                f"the state still holds {len(left)} resources: {[r['urn'] for r in left][:5]}"
            )
        if stack.live_clusters():
            outcome.violations.append(f"cluster {stack.name} is still live after the destroy")
        # The volume outlives the destroy (its data is the user's: no allow_data_loss), once.
        if len(volumes := stack.live_volumes()) != 1:
            outcome.violations.append(f"volumes {volumes} live after the destroy, expected the one retained")
    finally:
        campaign_report(outcome.report() + replay)
        if stack.live_clusters():  # never leave a cluster running on the module's emulator
            stack.run("destroy", *_engine.UP_FLAGS)
    assert not outcome.violations, outcome.report()
