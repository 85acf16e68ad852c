"""The workload components through the plugin's ``construct``, in a YAML program on the real engine: a
``ClusterControllers``, a ``CheckpointStore`` bound to a ``Volume``, a ``Sweep``, a ``TrainingRun`` and a
``BatchInference`` on a ``kubernetes`` provider of the cluster's ``kubeConfig`` preview the objects the Python
components render (their nested wire args reaching the Python dataclasses), and each component's placement
guard refuses an unsafe layout at preview in one line, as in a Python program.

Oracles: the real engine and YAML language host, ``pulumi preview --json``'s steps (what the engine would
create, under which parent), the emulator (nothing created by a preview).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import _engine

pytestmark = pytest.mark.engine

API_KEY = "tgp_v1_engine-native-components-0123"

PROGRAM = """resources:
  data:
    type: together:index:Volume
    properties:
      volumeName: yaml-components-data
      region: us-central-8
      sizeTib: 1
  gpu:
    type: together:index:Cluster
    properties:
      clusterName: yaml-components
      region: us-central-8
      gpuType: H100_SXM
      numGpus: 8
      numPreemptibleGpus: 16
      nvidiaVersionId: nv-570-cu128-ubuntu2204
      volumeId: ${data.volumeId}
  k8s:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${gpu.kubeConfig}
  controllers:
    type: together:index:ClusterControllers
    properties:
      descheduler: true
      deschedulingIntervalSeconds: 60
    options:
      providers:
        - ${k8s}
  checkpoints:
    type: together:index:CheckpointStore
    properties:
      storage:
        sharedVolume:
          claimName: ckpt
          size: 100Gi
      volumeName: yaml-components-data
    options:
      providers:
        - ${k8s}
  lr:
    type: together:index:Sweep
    properties:
      container:
        image: ghcr.io/example/train:1
        gpus: 8
      trials:
        - learningRate: 0.1
        - learningRate: 0.2
          layers: [2, 4]
      checkpoint:
        sharedVolume:
          claimName: ckpt
      placement:
        computeClass: preemptible-first
      sweepName: lr
    options:
      providers:
        - ${k8s}
      dependsOn:
        - ${controllers}
        - ${checkpoints}
  pretrain:
    type: together:index:TrainingRun
    properties:
      coordinator:
        image: ghcr.io/example/train:1
      worker:
        image: ghcr.io/example/train:1
        gpus: 8
      numWorkers: 2
      checkpoint:
        sharedVolume:
          claimName: ckpt
      pod:
        gracePeriodSeconds: GRACE
    options:
      providers:
        - ${k8s}
      dependsOn:
        - ${controllers}
        - ${checkpoints}
  llm:
    type: together:index:BatchInference
    properties:
      container:
        image: ghcr.io/example/serve:1
        gpus: 8
      replicas: 2
      servicePort: 8000
      maxUnavailable: 25%
      placement:
        computeClass: standard
        critical: true
    options:
      providers:
        - ${k8s}
outputs:
  jobSets: ${lr.jobSets}
  coordinator: ${pretrain.coordinatorHost}
  deployment: ${llm.deploymentName}
  claim: ${checkpoints.claimName}
"""


def _preview(emu: Any, tmp_path: Path, grace: int, *flags: str) -> Any:
    body = PROGRAM.replace("GRACE", str(grace))
    project = _engine.write_yaml_project(tmp_path / "project", "yaml-components", body)
    env = _engine.engine_env(tmp_path, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY})
    _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
    return _engine.run_pulumi(["preview", *_engine.PREVIEW_FLAGS, *flags], cwd=project, env=env)


def _steps(preview: Any) -> dict[tuple[str, str], dict[str, Any]]:
    """Each step of the preview by (type, name): the object's ``metadata.name`` when it has one, else its
    resource name."""
    steps = json.loads(preview.stdout)["steps"]
    return {(s["newState"]["type"], _name(s)): s for s in steps}


def _name(step: dict[str, Any]) -> str:
    metadata = step["newState"].get("inputs", {}).get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) else str(step["urn"].rsplit("::", 1)[-1])


def _parented_by(steps: dict[tuple[str, str], dict[str, Any]], component: str) -> set[tuple[str, str]]:
    """The (type, name) of every step whose parent is the component of that type token."""
    parents = {s["urn"] for (kind, _), s in steps.items() if kind == component}
    return {key for key, s in steps.items() if s["newState"].get("parent") in parents}


def test_each_workload_component_of_a_yaml_program_previews_what_the_python_one_renders(
    emu, tmp_path
) -> None:
    proc = _preview(emu, tmp_path, 60, "--json")
    assert proc.returncode == 0, _engine.output(proc)
    steps = _steps(proc)
    for token in ("ClusterControllers", "CheckpointStore", "Sweep", "TrainingRun", "BatchInference"):
        (step,) = [s for (kind, _), s in steps.items() if kind == f"together:index:{token}"]
        assert step["op"] == "create", step

    # The Sweep: one JobSet per trial, each trial's parameters (any JSON) in its pod's environment.
    trials = {
        name: s for (kind, name), s in steps.items() if kind == "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
    }
    lr = sorted(name for name in trials if name.startswith("lr-"))
    assert lr == ["lr-0", "lr-1"], sorted(trials)
    (job,) = trials["lr-1"]["newState"]["inputs"]["spec"]["replicatedJobs"]
    (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
    parameters = next(e["value"] for e in container["env"] if e["name"] == "TRIAL_PARAMETERS")
    assert json.loads(parameters) == {"learningRate": 0.2, "layers": [2, 4]}
    assert ("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "lr-1") in _parented_by(
        steps, "together:index:Sweep"
    )

    # The CheckpointStore: the claim, bound to the shared volume's static PersistentVolume (by its name).
    claim_key = ("kubernetes:core/v1:PersistentVolumeClaim", "ckpt")
    assert claim_key in _parented_by(steps, "together:index:CheckpointStore"), sorted(steps)
    claim = steps[claim_key]["newState"]["inputs"]["spec"]
    assert (claim["volumeName"], claim["storageClassName"]) == ("yaml-components-data", ""), claim

    # The TrainingRun: its coordinator's Service, and a JobSet per worker.
    run = _parented_by(steps, "together:index:TrainingRun")
    assert ("kubernetes:core/v1:Service", "pretrain-coordinator") in run, run
    assert {name for kind, name in run if kind.endswith(":JobSet")} >= {
        "pretrain-workers-0",
        "pretrain-workers-1",
    }

    # The BatchInference on standard nodes: a Deployment, and a disruption budget taking the percentage as given.
    served = {
        kind: s["newState"]["inputs"]
        for (kind, _), s in steps.items()
        if (kind, _) in _parented_by(steps, "together:index:BatchInference")
    }
    assert served["kubernetes:apps/v1:Deployment"]["spec"]["replicas"] == 2
    assert served["kubernetes:policy/v1:PodDisruptionBudget"]["spec"]["maxUnavailable"] == "25%"

    # The ClusterControllers: JobSet's and the descheduler's charts.
    charts = {
        name for kind, name in _parented_by(steps, "together:index:ClusterControllers") if "helm" in kind
    }
    assert charts == {"controllers-jobset", "controllers-descheduler"}, charts
    assert all(c["cluster_name"] != "yaml-components" for c in emu.admin.clusters())


def test_a_training_run_whose_layout_the_guard_refuses_fails_the_preview_in_one_line(emu, tmp_path) -> None:
    proc = _preview(emu, tmp_path, 600)
    said = _engine.output(proc)
    assert proc.returncode != 0, said
    (line,) = {x.split("error: ", 1)[-1] for x in said.splitlines() if "placement guard" in x}
    assert "TrainingRun 'pretrain' refused by the preemptible placement guard" in line, said
    assert "terminationGracePeriodSeconds=600" in line, said
    assert "Traceback" not in said and 'File "' not in said, said


GATE_KEY = "tgp_v1_engine-native-gate-key-4567"
GATE_PROGRAM = """config:
  apiKey:
    type: string
    secret: true
resources:
  gpu:
    type: together:index:Cluster
    properties:
      clusterName: yaml-gate
      region: us-central-8
      gpuType: H100_SXM
      numGpus: 8
      nvidiaVersionId: nv-570-cu128-ubuntu2204
  k8s:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${gpu.kubeConfig}
  gate:
    type: together:index:RemediationGate
    properties:
      clusterId: ${gpu.clusterId}
      modes: MODES
      image: registry.example/remediation-gate:1
      apiKey: ${apiKey}
      intervalSeconds: 10
    options:
      providers:
        - ${k8s}
outputs:
  gateNamespace: ${gate.namespace}
"""


def _preview_gate(emu: Any, tmp_path: Path, modes: str) -> Any:
    project = _engine.write_yaml_project(
        tmp_path / "project", "yaml-gate", GATE_PROGRAM.replace("MODES", modes)
    )
    env = _engine.engine_env(tmp_path, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY})
    _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env, check=True)
    _engine.run_pulumi(["config", "set", "--secret", "apiKey", GATE_KEY], cwd=project, env=env, check=True)
    return _engine.run_pulumi(["preview", "--json", *_engine.PREVIEW_FLAGS], cwd=project, env=env)


def test_a_remediation_gate_of_a_yaml_program_previews_its_objects_its_key_never_in_plain_text(
    emu, tmp_path
) -> None:
    proc = _preview_gate(emu, tmp_path, "[reboot-vm, vm-only]")
    assert proc.returncode == 0, _engine.output(proc)
    steps = _steps(proc)
    gate = {
        kind.rsplit(":", 1)[-1]: name for kind, name in _parented_by(steps, "together:index:RemediationGate")
    }
    assert gate == {
        "Namespace": "together-remediation-gate",
        "ServiceAccount": "gate",
        "ClusterRole": "together-remediation-gate-gate",
        "ClusterRoleBinding": "together-remediation-gate-gate",
        "Secret": "gate-api-key",
        "Deployment": "gate",
    }, gate
    deployment = steps[("kubernetes:apps/v1:Deployment", "gate")]["newState"]["inputs"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"][container["command"].index("--modes") + 1] == "reboot-vm,vm-only"
    # The key reaches the gate through its Secret, and is printed nowhere (secret across the plugin's wire).
    env = {e["name"]: e for e in container["env"]}
    assert env["TOGETHER_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "gate-api-key", "key": "api-key"}
    assert GATE_KEY not in _engine.output(proc)


def test_a_remediation_gate_given_a_mode_that_does_not_exist_fails_the_preview_in_one_line(
    emu, tmp_path
) -> None:
    proc = _preview_gate(emu, tmp_path, "[reboot]")
    said = _engine.output(proc)
    assert proc.returncode != 0, said
    (line,) = {x.split("error: ", 1)[-1] for x in said.splitlines() if "not a remediation mode" in x}
    assert "RemediationGate 'gate'" in line and "modes has 'reboot'" in line, said
    assert "Traceback" not in said and 'File "' not in said, said
