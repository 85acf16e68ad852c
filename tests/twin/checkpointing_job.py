"""A Job of one real training loop on the checkpoint runtime (tests/twin/workloads/train_loop.py, run by the
twin as a local process), and what tests and benchmarks read of it: its running pods, their logs, the complete
checkpoints on disk and who wrote each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from together_clusters.components.checkpoint import contract
from together_clusters.emulator.kubernetes.kwok_config import RUN, RUN_LOCAL

TRAIN_LOOP = Path(__file__).resolve().parent / "workloads" / "train_loop.py"
COMPUTE_CLASS = "together.ai/compute-class"
JOB = "train"


class HasCore(Protocol):
    core: client.CoreV1Api


def training_job(checkpoints: Path) -> dict[str, Any]:
    env = {
        contract.ENV_BACKEND: contract.BACKEND_FILESYSTEM,
        contract.ENV_DIR: str(checkpoints),
        contract.ENV_RESUME: "true",
        contract.ENV_SAVE_BUDGET: "120",
        "STEP_SECONDS": "0.05",
        "SAVE_EVERY": "20",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": JOB},
        "spec": {
            "backoffLimit": 6,
            "template": {
                "metadata": {"annotations": {RUN: RUN_LOCAL}, "labels": {"app": JOB}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 300,
                    "nodeSelector": {COMPUTE_CLASS: "preemptible"},
                    "tolerations": [{"key": COMPUTE_CLASS, "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/trainer:1",
                            "command": ["python", str(TRAIN_LOOP)],
                            "env": [{"name": k, "value": v} for k, v in env.items()],
                        }
                    ],
                },
            },
        },
    }


def running_pods(cluster: HasCore, namespace: str) -> list[Any]:
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=f"app={JOB}").items
    return [p for p in pods if p.status.phase == "Running" and p.metadata.deletion_timestamp is None]


def log(cluster: HasCore, namespace: str, name: str) -> str:
    try:
        return str(cluster.core.read_namespaced_pod_log(name, namespace) or "")
    except ApiException:
        return ""


def complete_saves(checkpoints: Path) -> dict[str, tuple[int, str]]:
    """Each complete checkpoint (its manifest written last) -> (step, the pod that wrote it)."""
    saves = {}
    for manifest in checkpoints.glob("ckpt-*/MANIFEST.json"):
        try:
            data = json.loads(manifest.read_text())
        except (OSError, ValueError):
            continue
        saves[manifest.parent.name] = (int(data["step"]), str(data["metadata"].get("pod")))
    return saves
