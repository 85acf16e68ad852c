"""Section 9: the remediation gate (issue 32): what approving a repair through the gate costs, against what
the workload itself takes to checkpoint and be requeued, measured alone in the same run.

On the twin (speed 60: a 300 s grace lasts 5 s), a Job of one real training loop on the checkpoint runtime
(tests/twin/workloads/train_loop.py, a local process) runs on a preemptible node. Two ways to take it off
that node, interleaved (A B, then B A):

- **alone** (the floor): evict its pod through the Eviction API, timed until the pod has exited (its SIGTERM
  save written) and the Job's replacement pod exists, Running or Pending: the work's own checkpoint and
  requeue, with nothing in between.
- **gate**: the platform raises an automated ``REBOOT_VM`` of the node; ``gate.approve`` (the code of
  ``together-clusters remediations approve``, in this process: the command's interpreter start is not the
  gate's cost) is timed from its call to the API's approval. It does the same eviction and waits for the
  same two things, plus its own reads and the approval.

Goal: at most 1.2x (the issue's).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config

from together_clusters.cli.drill.safety import instance_of
from together_clusters.cli.remediations import gate
from together_clusters.emulator.admin_client import AdminClient
from together_clusters.provider.client import TogetherClient
from together_clusters.provider.kubeconfig import kubeconfig_text

from .context import Context
from .figures import Figure, Goal, unavailable
from .servers import API_KEY, api_client, create_request, twin_emulator
from .twin import twin_missing

SECTION = "9. Remediation gate"
NAME = "gate: approve to approval, vs the work's own checkpoint and requeue"
GOAL = Goal("<=", 1.2)
SPEED = 60.0
TIMEOUT_S = 120.0
REBOOT_VM = "REMEDIATION_MODE_REBOOT_VM"


def run(ctx: Context) -> list[Figure]:
    if ctx.scale.quick:
        return [unavailable(SECTION, NAME, "the quick run skips it (a twin and 6 drains take a minute)", GOAL)]
    missing = twin_missing()
    if missing is not None:
        return [unavailable(SECTION, NAME, missing, GOAL)]
    from tests.twin.checkpointing_job import JOB, log, running_pods, training_job

    samples: dict[str, list[float]] = {"alone": [], "gate": []}
    with twin_emulator(SPEED) as emulator, tempfile.TemporaryDirectory() as scratch:
        admin = AdminClient(emulator.url)
        with api_client(emulator.url) as api:
            reply = api.post("/v1/compute/clusters", json=create_request("gate", num_preemptible_gpus=16))
            reply.raise_for_status()
            cluster_id = reply.json()["cluster_id"]
            cluster = _ready(api, cluster_id)
        kube = config.new_client_from_config_dict(
            yaml.safe_load(kubeconfig_text(cluster["kube_config"]) or "")
        )
        view = _View(client.CoreV1Api(kube))
        batch = client.BatchV1Api(kube)
        together = TogetherClient(API_KEY, emulator.url)

        def started(namespace: str) -> Any:
            view.core.create_namespace({"metadata": {"name": namespace}})
            batch.create_namespaced_job(namespace, training_job(Path(scratch) / namespace))
            pod = _until(lambda: (running_pods(view, namespace) or [None])[0], "the training pod to run")
            _until(
                lambda: "saved step=" in log(view, namespace, pod.metadata.name) or None, "a periodic save"
            )
            return pod

        def moved(namespace: str, old: Any) -> bool:
            pods = view.core.list_namespaced_pod(namespace, label_selector=f"app={JOB}").items
            old_gone = all(
                p.metadata.uid != old.metadata.uid or p.status.phase in ("Succeeded", "Failed") for p in pods
            )
            replaced = any(
                p.metadata.uid != old.metadata.uid
                and p.metadata.deletion_timestamp is None
                and p.status.phase in ("Running", "Pending")
                for p in pods
            )
            return old_gone and replaced

        def alone(index: int) -> float:
            namespace = f"alone-{index}"
            pod = started(namespace)
            began = time.monotonic()
            view.core.create_namespaced_pod_eviction(
                pod.metadata.name,
                namespace,
                {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod.metadata.name}},
            )
            _until(lambda: moved(namespace, pod) or None, "the pod to checkpoint and be requeued", poll=0.02)
            took = time.monotonic() - began
            gone(namespace)
            return took

        def gated(index: int) -> float:
            namespace = f"gate-{index}"
            pod = started(namespace)
            node = pod.spec.node_name
            instance = instance_of(node, cluster_id, together.get_cluster(cluster_id).gpu_worker_nodes)
            rem = admin.raise_remediation(cluster_id, instance, mode=REBOOT_VM)
            began = time.monotonic()
            target = gate.find(together, cluster_id, rem["id"])
            gate.approve(
                together,
                kube,
                target,
                gate.GateOptions(timeout_seconds=TIMEOUT_S),
                lambda line: ctx.progress(f"remediation gate: +{time.monotonic() - began:.2f}s {line}"),
            )
            took = time.monotonic() - began
            # The reboot ends and the gate's cordon goes, so the next repetition has both nodes.
            _until(
                lambda: (
                    together.get_remediation(cluster_id, instance, rem["id"]).state == "SUCCEEDED" or None
                ),
                "the reboot to end",
            )
            gate.release_ended(together, kube, cluster_id)
            gone(namespace)
            return took

        def gone(namespace: str) -> None:
            """The measurement's Job and pods deleted, so the next one drains only its own."""
            view.core.delete_namespace(namespace)
            _until(lambda: not view.core.list_namespaced_pod(namespace).items or None, "the pods to go")

        reps = 3
        for index in range(reps):
            order = (alone, gated) if index % 2 == 0 else (gated, alone)
            for measure in order:
                samples["alone" if measure is alone else "gate"].append(measure(index))
            ctx.progress(f"remediation gate: repetition {index + 1}/{reps}")
        together.close()
    value = statistics.median(samples["gate"]) / statistics.median(samples["alone"])
    note = (
        f"median gate {statistics.median(samples['gate']):.2f}s, alone {statistics.median(samples['alone']):.2f}s "
        f"(speed {SPEED:g}: the pod's save and exit, the Job controller's replacement; the gate adds its "
        f"reads, its {gate.GateOptions().poll_seconds:g}s polls and the approval)"
    )
    return [
        Figure(
            SECTION, NAME, round(value, 2), "x", "the work's own checkpoint and requeue", GOAL, note, samples
        )
    ]


class _View:
    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core


def _ready(api: Any, cluster_id: str) -> dict[str, Any]:
    def ready() -> dict[str, Any] | None:
        cluster = dict(api.get(f"/v1/compute/clusters/{cluster_id}").json())
        nodes = cluster.get("gpu_worker_nodes") or []
        return cluster if cluster["status"] == "Ready" and len(nodes) >= 3 else None

    return _until(ready, "the cluster to be Ready")


def _until(check: Any, what: str, poll: float = 0.1) -> Any:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        found = check()
        if found is not None:
            return found
        time.sleep(poll)
    raise RuntimeError(f"timed out waiting for {what}")
