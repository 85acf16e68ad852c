"""A stack written by the release before the package tree was restructured (2d0b321, issue 29) still
refreshes, previews and destroys with today's code: the frozen names of that issue, checked with the real
engine.

Frozen: the classes the engine pickled into the state by reference,
``together_clusters.provider.resource.ClusterProvider`` and ``...VolumeProvider``, and the type tokens of the
resources and components (``pulumi-python:dynamic/together_clusters:Cluster``, ``...:Volume``,
``together:components:CheckpointStore``). A moved module or a renamed class fails the dynamic provider's
unpickling at refresh or destroy; a changed type token gives another URN, so today's program would create
and delete instead of finding its resources (preview shows changes).

The fixture ``old_state/release-2d0b321.json`` is a ``pulumi stack export`` written by a real ``pulumi up``
and ``pulumi refresh`` at commit 2d0b321 (recipe: ``old_state/record_release.py``): a Volume, a Cluster using
it, and a CheckpointStore on the volume whose Kubernetes provider renders its manifests to a folder (no
Kubernetes API needed). It is imported into a fresh stack whose resources live in a fresh emulator: the
official SDK re-creates the volume and the cluster there with the recorded inputs, and the state is moved to
them, as far as where they live goes and no further: their ids, the endpoint, the cluster's creation time and
kubeconfig (the platform's, of another cluster), the render folder. The types, the pickled providers, the
inputs and every other output are imported as recorded, so a refresh that changes anything is a change of
ours, not of the platform.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import together
import yaml

from tests import _engine
from tests.provider.old_state import record_release as record
from together_clusters.emulator.server import RunningEmulator, start_emulator

pytestmark = pytest.mark.engine

FIXTURE = Path(__file__).parent / "old_state" / "release-2d0b321.json"
CLUSTER_TYPE = "pulumi-python:dynamic/together_clusters:Cluster"
VOLUME_TYPE = "pulumi-python:dynamic/together_clusters:Volume"
STORE_TYPE = "together:components:CheckpointStore"
KUBERNETES_PROVIDER_TYPE = "pulumi:providers:kubernetes"
CLAIM_TYPE = "kubernetes:core/v1:PersistentVolumeClaim"
PROVIDER_MODULE = b"together_clusters.provider.resource"
PROVIDER_CLASS = {CLUSTER_TYPE: b"ClusterProvider", VOLUME_TYPE: b"VolumeProvider"}
# The key Pulumi marks a secret value with in a deployment (sdk/go/common/resource/sig: Secret).
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
SIG_KEY = "4dabf18193072939515e22adb298388d"
# What a refresh may change in a resource's record besides what this test compares: bookkeeping.
BOOKKEEPING = ("created", "modified", "sourcePosition", "stackTrace")


def _resources(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    return list(deployment["deployment"].get("resources") or [])


def _resource(deployment: dict[str, Any], type_: str) -> dict[str, Any]:
    [found] = [r for r in _resources(deployment) if r["type"] == type_]
    return found


def _records(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each resource by URN, without the bookkeeping a refresh rewrites."""
    return {r["urn"]: {k: v for k, v in r.items() if k not in BOOKKEEPING} for r in _resources(deployment)}


def test_fixture_is_a_state_of_the_stable_names():
    """What the fixture holds (a guard against an edited fixture; the engine test below is the check)."""
    text = FIXTURE.read_text()
    recorded = json.loads(text)
    for type_, class_name in PROVIDER_CLASS.items():
        resource = _resource(recorded, type_)
        pickled = base64.b64decode(resource["inputs"]["__provider"])
        assert PROVIDER_MODULE in pickled and class_name in pickled, type_
    _resource(recorded, STORE_TYPE)
    _resource(recorded, CLAIM_TYPE)
    cluster, volume = _resource(recorded, CLUSTER_TYPE), _resource(recorded, VOLUME_TYPE)
    assert cluster["outputs"]["status"] == "Ready"
    assert cluster["inputs"]["volume_id"] == volume["id"], "the cluster uses the volume"
    assert volume["outputs"]["status"] == "bound"
    assert record.API_KEY not in text


def _relocated(text: str, moves: dict[str, str], kubeconfig: str, cluster_id: str) -> dict[str, Any]:
    """The fixture with each recorded string of ``moves`` replaced by its new value, and the cluster's
    ``kube_config`` (a secret: ciphertext in the fixture) replaced by ``kubeconfig`` in plaintext, which
    ``pulumi stack import`` encrypts."""
    for old, new in moves.items():
        assert text.count(json.dumps(old)[1:-1]) >= 1, old
        text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    deployment = json.loads(text)
    [cluster] = [r for r in _resources(deployment) if r.get("id") == cluster_id]
    assert cluster["outputs"]["kube_config"][SIG_KEY] == SECRET_SIG
    cluster["outputs"]["kube_config"] = {SIG_KEY: SECRET_SIG, "plaintext": json.dumps(kubeconfig)}
    return deployment


def _rendered_claim(render_dir: Path, claim: dict[str, Any]) -> Path:
    """Write the claim as its render-mode provider wrote it when the state was recorded (pulumi-kubernetes,
    ``renderPathForResource``): the file is the claim's live object, re-created like the cluster is."""
    live = {k: v for k, v in claim["outputs"].items() if not k.startswith("__")}
    metadata = live["metadata"]
    api_version = live["apiVersion"].replace("/", "_").replace(":", "_")
    name = f"{api_version}-{live['kind'].lower()}-{metadata.get('namespace') or 'default'}-{metadata['name']}"
    path = render_dir / "1-manifest" / f"{name}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(live))
    return path


def _summary(stdout: str) -> list[str]:
    """The engine's ``Resources:`` summary of a run, one entry a line (``7 unchanged``, ``1 updated``...)."""
    lines = stdout.splitlines()
    summary: list[str] = []
    for line in lines[lines.index("Resources:") + 1 :]:
        if not line.strip():
            break
        summary.append(line.strip())
    return summary


def _only_unchanged(stdout: str) -> bool:
    """Whether the summary counts unchanged resources only: nothing created, updated, replaced or deleted."""
    summary = _summary(stdout)
    return len(summary) == 1 and re.fullmatch(r"\d+ unchanged", summary[0]) is not None


class ReleaseStack(_engine.ProjectStack):
    """The fixture imported into a fresh stack (project ``record.PROJECT``, stack ``record.STACK``) whose volume
    and cluster live in an emulator: ``import_release_state``."""

    def __init__(
        self, directory: Path, env: dict[str, str], cluster_id: str, volume_id: str, claim_file: Path
    ) -> None:
        self.dir, self.env = directory, env
        self.cluster_id, self.volume_id, self.claim_file = cluster_id, volume_id, claim_file

    def exported(self) -> dict[str, Any]:
        """``pulumi stack export``, secrets shown."""
        return json.loads(self.run("stack", "export", "--show-secrets", check=True).stdout)


def import_release_state(workdir: Path, emu: RunningEmulator, base_url: str) -> ReleaseStack:
    """The fixture, imported into a stack in ``workdir`` run against the API at ``base_url`` (``emu``'s, or a
    proxy's in front of it): the volume and the cluster it names are created in ``emu`` with the recorded
    inputs and settled, and the state is moved to them (``_relocated``); the import changes nothing else."""
    text = FIXTURE.read_text()
    recorded = json.loads(text)
    old_cluster, old_volume = _resource(recorded, CLUSTER_TYPE), _resource(recorded, VOLUME_TYPE)
    old_render_dir = _resource(recorded, KUBERNETES_PROVIDER_TYPE)["inputs"]["renderYamlToDirectory"]
    cluster_in, volume_in = old_cluster["inputs"], old_volume["inputs"]
    render_dir = workdir / "rendered"

    sdk = together.Together(api_key=record.API_KEY, base_url=emu.base_url, max_retries=2)
    try:
        volume = sdk.clusters.storage.create(
            region=volume_in["region"],
            size_tib=volume_in["size_tib"],
            volume_name=volume_in["volume_name"],
            is_lifecycle_independent=volume_in["is_lifecycle_independent"],
        )
        created = sdk.clusters.create(
            cluster_name=cluster_in["cluster_name"],
            region=cluster_in["region"],
            gpu_type=cluster_in["gpu_type"],
            num_gpus=cluster_in["num_gpus"],
            num_preemptible_gpus=cluster_in["num_preemptible_gpus"],
            billing_type=cluster_in["billing_type"],
            cluster_type=cluster_in["cluster_type"],
            nvidia_version_id=cluster_in["nvidia_version_id"],
            volume_id=volume.volume_id,
        )
        emu.admin.advance(record.SETTLE_S)
        live = sdk.clusters.retrieve(created.cluster_id)
        assert live.status == "Ready"
        # The same key means the same project and organization as when the state was written.
        assert created.project_id == old_cluster["outputs"]["api_project_id"]
    finally:
        sdk.close()
    assert live.created_at is not None
    moves = {
        old_volume["id"]: volume.volume_id,
        old_cluster["id"]: created.cluster_id,
        old_cluster["outputs"]["api_endpoint"]: base_url,
        # The platform's time, written as the release writes it (provider/mapping.py, _iso).
        old_cluster["outputs"]["created_at"]: live.created_at.isoformat().replace("+00:00", "Z"),
        old_render_dir: str(render_dir),
    }
    claim_file = _rendered_claim(render_dir, _resource(recorded, CLAIM_TYPE))
    kubeconfig = base64.b64decode(live.kube_config).decode()
    relocated = _relocated(text, moves, kubeconfig, created.cluster_id)
    assert _resource(relocated, VOLUME_TYPE)["inputs"] == volume_in
    assert _resource(relocated, CLUSTER_TYPE)["inputs"] == cluster_in | {"volume_id": volume.volume_id}
    state_file = workdir / "state.json"
    state_file.write_text(json.dumps(relocated, indent=2))

    # No PYTHONPATH: the pickled providers load from the installed package, as in a user's project.
    project = _engine.write_project(workdir / "prog", record.PROJECT, record.PROGRAM)
    env = _engine.engine_env(
        workdir, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": record.API_KEY}
    )
    stack = ReleaseStack(project, env, created.cluster_id, volume.volume_id, claim_file)
    stack.run("stack", "init", record.STACK, check=True)
    stack.config(record.RENDER_DIR_KEY, render_dir)
    stack.run("stack", "import", "--file", str(state_file), check=True)
    assert _records(stack.exported()) == _records(relocated), "the import changed the state"
    return stack


def test_state_of_2d0b321_refreshes_previews_and_destroys(tmp_path):
    _engine.require_engine()
    with start_emulator(speed=600) as emu:
        stack = import_release_state(tmp_path, emu, emu.base_url)
        before = stack.exported()

        # REFRESH_ENV: the claim's provider renders YAML, which pulumi-kubernetes reads back only so.
        refresh = ["refresh", *_engine.UP_FLAGS, "--expect-no-changes"]
        proc = _engine.run_pulumi(refresh, cwd=stack.dir, env=stack.env | record.REFRESH_ENV)
        assert proc.returncode == 0, _engine.output(proc)
        assert _only_unchanged(proc.stdout), _engine.output(proc)
        # --expect-no-changes and the summary do not count a changed output (pulumi 3.274): the state does.
        after = stack.exported()
        assert _records(after) == _records(before), "refresh changed the state"
        assert _resource(after, CLUSTER_TYPE)["id"] == stack.cluster_id
        assert _resource(after, VOLUME_TYPE)["id"] == stack.volume_id

        # Today's program declares the same resources: same type tokens, so the same URNs, and no change.
        proc = stack.run("preview", *_engine.PREVIEW_FLAGS, "--diff", "--expect-no-changes")
        assert proc.returncode == 0, _engine.output(proc)
        assert _only_unchanged(proc.stdout), _engine.output(proc)

        proc = stack.run("destroy", *_engine.UP_FLAGS)
        assert proc.returncode == 0, _engine.output(proc)
        assert _engine.stack_resources(stack.dir, stack.env) == []
        assert not stack.claim_file.exists(), (
            "the claim's provider renders to the folder the state was moved to"
        )
        emu.admin.advance(record.SETTLE_S)
        assert [c for c in emu.admin.clusters() if c["cluster_id"] == stack.cluster_id] == []
        assert [v for v in emu.admin.volumes() if v["volume_id"] == stack.volume_id] == []
