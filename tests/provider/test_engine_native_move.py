"""A Python stack's dynamic ``Cluster`` moves to the plugin's ``together:index:Cluster`` under the real engine,
against the emulator (issue 39, part 4), and its dynamic ``Volume`` to ``together:index:Volume``: the program that declared ``together_clusters.provider.Cluster`` (type
``pulumi-python:dynamic/together_clusters:Cluster``, snake_case state with the pickled ``__provider``) declares
the native type instead, with one ``aliases=[pulumi.Alias(type_=<the dynamic type>)]``. The preview shows no
create, delete or replace; the ``up`` keeps the cluster's id and sends the API no create and no delete; a
refresh afterwards finds no change and gives the resource the schema's outputs, and the moved resource
destroys the cluster as the plugin does. A move with a change at once updates the cluster in place.

What the engine does with the old state: its "same" step keeps the old outputs, so until a refresh (or an
update of the cluster) the moved resource's outputs are still the dynamic provider's snake_case ones with
``__provider``, and the schema's outputs (``clusterId``, ``kubeConfig``) are not set; the plugin's diff reads
that state (``wire.to_plain`` keeps snake_case names and drops ``__`` keys), so it finds no change. Run as
``pulumi up --refresh --run-program``, the move reads the cluster through the plugin first and the program sees
the schema's outputs in the same run, which is what docs/plugin.md says to do."""

from __future__ import annotations

import json

import pytest

from tests import _engine
from tests.faultproxy import FaultProxy
from tests.provider.test_engine_native import DRIVER, PREVIEW, UP, Stack
from together_clusters.provider.schema import CLUSTER_TYPE, VOLUME_TYPE

pytestmark = pytest.mark.engine

NATIVE_TYPE = "together:index:Cluster"
CLUSTERS = "/v1/compute/clusters"
VOLUMES = "/v1/compute/clusters/storage/volumes"

DYNAMIC_PROGRAM = f"""
import pulumi

from together_clusters.provider import Cluster, ClusterArgs

cluster = Cluster(
    "gpu",
    ClusterArgs(
        cluster_name="moved-cluster",
        region="us-central-8",
        gpu_type="H100_SXM",
        num_gpus=8,
        num_preemptible_gpus=8,
        nvidia_version_id={DRIVER!r},
        ready_timeout_minutes=5,
    ),
)
pulumi.export("cluster_id", cluster.id)
pulumi.export("status", cluster.status)
"""

# The same cluster on the native type: the schema's camelCase names, the dynamic type as the one alias.
NATIVE_PROGRAM = f"""
import pulumi

config = pulumi.Config()
cluster = pulumi.CustomResource(
    {NATIVE_TYPE!r},
    "gpu",
    {{
        "clusterName": "moved-cluster",
        "region": "us-central-8",
        "gpuType": "H100_SXM",
        "numGpus": 8,
        "numPreemptibleGpus": config.get_int("numPreemptibleGpus") if config.get_int("numPreemptibleGpus") is not None else 8,
        "nvidiaVersionId": {DRIVER!r},
        "readyTimeoutMinutes": 5,
        "status": None,
        "kubeConfig": None,
    }},
    pulumi.ResourceOptions(aliases=[pulumi.Alias(type_={CLUSTER_TYPE!r})]),
)
pulumi.export("cluster_id", cluster.id)
pulumi.export("status", cluster.status)
pulumi.export("has_kube_config", cluster.kubeConfig.apply(bool))
"""


@pytest.fixture(scope="module")
def proxy(emu):
    with FaultProxy(upstream=emu.base_url) as running:
        yield running


@pytest.fixture(scope="module")
def stack(proxy, tmp_path_factory):
    return Stack(tmp_path_factory.mktemp("move"), proxy.url, name="native-move", program=DYNAMIC_PROGRAM)


def _live(emu) -> list[dict]:
    return [c for c in emu.admin.clusters() if c["status"] != "Deleting"]


def _cluster_calls(proxy: FaultProxy, since: int) -> list[tuple[str, str]]:
    """The creates, updates and deletes of clusters the API was sent after request ``since``."""
    return [
        (method, path)
        for method, path in proxy.requests[since:]
        if path.startswith(CLUSTERS) and method in ("POST", "PUT", "PATCH", "DELETE")
    ]


def _created_dynamic(stack: Stack, emu) -> str:
    """``up`` of the dynamic program; the id of its cluster, whose state is the current release's."""
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    (resource,) = [r for r in _engine.stack_resources(stack.dir, stack.env) if r["type"] == CLUSTER_TYPE]
    # The state of the current release: snake_case outputs and the pickled provider.
    outputs = resource["outputs"]
    assert "__provider" in outputs and outputs["cluster_name"] == "moved-cluster", outputs
    assert resource["id"] in [c["cluster_id"] for c in _live(emu)]
    assert resource["id"] == stack.outputs()["cluster_id"]
    return resource["id"]


def _moved(stack: Stack) -> dict:
    """The moved resource's state: the native type on the plugin's default provider, the dynamic one gone."""
    resources = _engine.stack_resources(stack.dir, stack.env)
    assert not [r for r in resources if r["type"] == CLUSTER_TYPE], resources
    (resource,) = [r for r in resources if r["type"] == NATIVE_TYPE]
    assert "::pulumi:providers:together::default" in resource["provider"], resource["provider"]
    return resource


def test_the_dynamic_cluster_is_created(stack, emu):
    _created_dynamic(stack, emu)


def test_the_preview_of_the_move_creates_deletes_and_replaces_nothing(stack):
    (stack.dir / "__main__.py").write_text(NATIVE_PROGRAM)
    preview = stack.run(*PREVIEW, "--json", "--show-sames")
    assert preview.returncode == 0, _engine.output(preview)
    steps = json.loads(preview.stdout)["steps"]
    ops = [(step["op"], step["urn"].rsplit("::", 2)[-2]) for step in steps]
    assert sorted(ops) == [("same", "pulumi:pulumi:Stack"), ("same", NATIVE_TYPE)], _engine.output(preview)
    proc = stack.run(*PREVIEW, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)


def test_up_keeps_the_cluster_and_sends_no_create_or_delete(stack, emu, proxy):
    cluster_id = stack.outputs()["cluster_id"]
    before = len(proxy.requests)
    proc = stack.run(*UP, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    assert _cluster_calls(proxy, before) == [], proxy.requests[before:]
    assert [c["cluster_id"] for c in _live(emu)] == [cluster_id]
    resource = _moved(stack)
    assert resource["id"] == cluster_id
    # The engine kept the old outputs: the dynamic provider's names, so no kubeConfig until a refresh.
    assert "__provider" in resource["outputs"] and "kubeConfig" not in resource["outputs"]
    assert stack.outputs() == {"cluster_id": cluster_id, "status": "Ready", "has_kube_config": False}


def test_a_refresh_after_the_move_is_unchanged_and_writes_the_schemas_outputs(stack, emu, proxy):
    cluster_id = stack.outputs()["cluster_id"]
    before = len(proxy.requests)
    proc = stack.run("refresh", *_engine.UP_FLAGS, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    outputs = _moved(stack)["outputs"]
    assert "__provider" not in outputs and outputs["clusterId"] == cluster_id, sorted(outputs)
    assert not [name for name in outputs if "_" in name], sorted(outputs)
    assert isinstance(outputs["kubeConfig"], dict) and "ciphertext" in outputs["kubeConfig"]
    proc = stack.run(*UP, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    assert stack.outputs() == {"cluster_id": cluster_id, "status": "Ready", "has_kube_config": True}
    assert _cluster_calls(proxy, before) == []
    assert [c["cluster_id"] for c in _live(emu)] == [cluster_id]


def test_the_moved_cluster_is_destroyed_by_the_plugin(stack, emu, proxy):
    cluster_id = stack.outputs()["cluster_id"]
    before = len(proxy.requests)
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    assert _cluster_calls(proxy, before) == [("DELETE", f"{CLUSTERS}/{cluster_id}")]
    assert _live(emu) == []
    assert _engine.stack_resources(stack.dir, stack.env) == []


def test_a_move_with_a_change_updates_the_cluster_in_place(emu, proxy, tmp_path):
    stack = Stack(tmp_path, proxy.url, name="native-move-change", program=DYNAMIC_PROGRAM)
    cluster_id = _created_dynamic(stack, emu)
    (stack.dir / "__main__.py").write_text(NATIVE_PROGRAM)
    stack.config("numPreemptibleGpus", 0)
    preview = stack.run(*PREVIEW, "--json")
    assert preview.returncode == 0, _engine.output(preview)
    ops = [(step["op"], step["urn"].rsplit("::", 2)[-2]) for step in json.loads(preview.stdout)["steps"]]
    assert ("update", NATIVE_TYPE) in ops and not [op for op, _ in ops if op not in ("same", "update")], ops
    before = len(proxy.requests)
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    assert _cluster_calls(proxy, before) == [("PUT", f"{CLUSTERS}/{cluster_id}")], proxy.requests[before:]
    outputs = _moved(stack)["outputs"]
    assert outputs["clusterId"] == cluster_id and "__provider" not in outputs, sorted(outputs)
    assert [c["desired_preemptible_gpus"] for c in _live(emu) if c["cluster_id"] == cluster_id] == [0]
    proc = stack.run("refresh", *_engine.UP_FLAGS, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    assert cluster_id not in [c["cluster_id"] for c in _live(emu)]


def test_up_refreshing_through_the_program_moves_and_gives_the_schemas_outputs_at_once(emu, proxy, tmp_path):
    stack = Stack(tmp_path, proxy.url, name="native-move-refresh", program=DYNAMIC_PROGRAM)
    cluster_id = _created_dynamic(stack, emu)
    (stack.dir / "__main__.py").write_text(NATIVE_PROGRAM)
    before = len(proxy.requests)
    proc = stack.run(*UP, "--refresh", "--run-program", "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    assert _cluster_calls(proxy, before) == [], proxy.requests[before:]
    outputs = _moved(stack)["outputs"]
    assert outputs["clusterId"] == cluster_id and "__provider" not in outputs, sorted(outputs)
    assert stack.outputs() == {"cluster_id": cluster_id, "status": "Ready", "has_kube_config": True}
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    assert cluster_id not in [c["cluster_id"] for c in _live(emu)]


DYNAMIC_VOLUME_PROGRAM = """
import pulumi

from together_clusters.provider import Volume, VolumeArgs

volume = Volume("data", VolumeArgs(volume_name="moved-volume", region="us-central-8", size_tib=SIZE))
pulumi.export("volume_id", volume.volume_id)
"""

# The same volume on the native type, the dynamic Volume type as the one alias.
NATIVE_VOLUME_PROGRAM = f"""
import pulumi

volume = pulumi.CustomResource(
    "together:index:Volume",
    "data",
    {{"volumeName": "moved-volume", "region": "us-central-8", "sizeTib": SIZE, "volumeId": None}},
    pulumi.ResourceOptions(aliases=[pulumi.Alias(type_={VOLUME_TYPE!r})]),
)
pulumi.export("volume_id", volume.id)
"""


def _volume_calls(proxy: FaultProxy, since: int) -> list[tuple[str, str]]:
    return [
        (method, path)
        for method, path in proxy.requests[since:]
        if path.startswith(VOLUMES) and method in ("POST", "PUT", "PATCH", "DELETE")
    ]


def test_the_dynamic_volume_moves_to_the_native_type_keeping_the_volume_and_its_data(emu, proxy, tmp_path):
    """A Volume keeps the data: the move creates, deletes and replaces nothing, and a size change made with it
    resizes the same volume in place."""
    stack = Stack(
        tmp_path, proxy.url, name="native-move-volume", program=DYNAMIC_VOLUME_PROGRAM.replace("SIZE", "1")
    )
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    (dynamic,) = [r for r in _engine.stack_resources(stack.dir, stack.env) if r["type"] == VOLUME_TYPE]
    volume_id = dynamic["id"]
    assert "__provider" in dynamic["outputs"], dynamic["outputs"]

    (stack.dir / "__main__.py").write_text(NATIVE_VOLUME_PROGRAM.replace("SIZE", "1"))
    preview = stack.run(*PREVIEW, "--json")
    assert preview.returncode == 0, _engine.output(preview)
    ops = {step["op"] for step in json.loads(preview.stdout)["steps"]}
    assert ops <= {"same"}, ops
    before = len(proxy.requests)
    proc = stack.run(*UP, "--refresh", "--run-program", "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    assert _volume_calls(proxy, before) == [], proxy.requests[before:]
    resources = _engine.stack_resources(stack.dir, stack.env)
    assert not [r for r in resources if r["type"] == VOLUME_TYPE], resources
    (moved,) = [r for r in resources if r["type"] == "together:index:Volume"]
    assert moved["id"] == volume_id and moved["outputs"]["volumeId"] == volume_id, moved["outputs"]

    (stack.dir / "__main__.py").write_text(NATIVE_VOLUME_PROGRAM.replace("SIZE", "2"))
    before = len(proxy.requests)
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    assert [m for m, _ in _volume_calls(proxy, before)] in (["PUT"], ["PATCH"]), proxy.requests[before:]
    assert [v["size_tib"] for v in emu.admin.volumes() if v["volume_id"] == volume_id] == [2]

    proc = stack.run("destroy", *_engine.UP_FLAGS)  # no allowDataLoss: the volume leaves the stack, kept
    assert proc.returncode == 0, _engine.output(proc)
    assert volume_id in [v["volume_id"] for v in emu.admin.volumes()]
