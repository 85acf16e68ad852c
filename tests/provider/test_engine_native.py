"""The native provider plugin ``together`` under the real Pulumi engine, against the emulator: a program that
knows nothing of this package's Python classes (``pulumi.CustomResource("together:index:Cluster", ...)`` with
the schema's camelCase names, the plugin named in ``Pulumi.yaml``) previews, creates, changes its preemptible
GPUs in place with one PUT, refreshes without a change and destroys; a refusal is one line at preview naming
the field; ``pulumi import`` adopts a cluster made with ``tg clusters create``, and the next ``up`` changes nothing; the
YAML example (``examples/yaml``, ``runtime: yaml``) previews, deploys and is destroyed on the plugin, and a YAML
project imports a cluster (the generated code, pasted, changes nothing) and reads one with ``get``; a YAML
``together:index:BatchJob`` (the plugin's ``construct``) on a ``kubernetes`` provider of the cluster's
``kubeConfig`` is refused at preview in the placement guard's one line, and a valid one previews its JobSet."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests import _engine
from tests.emulator.test_tg_cli import _run_tg
from tests.faultproxy import FaultProxy
from together_clusters.provider import native

pytestmark = pytest.mark.engine

API_KEY = "tgp_v1_engine-native-key-0123456789"
PLUGIN_DIR = Path(native.__file__).resolve().parent / "plugin"
PREVIEW = ["preview", *_engine.PREVIEW_FLAGS]
UP = ["up", *_engine.UP_FLAGS]
DRIVER = "nv-570-cu128-ubuntu2204"
PULUMI_BIN = _engine.ROOT / ".engine" / "bin" / "pulumi"

PROGRAM = """
import pulumi

config = pulumi.Config()
cluster = pulumi.CustomResource(
    "together:index:Cluster",
    "gpu",
    {
        "clusterName": config.get("clusterName") or "native-engine",
        "region": "us-central-8",
        "gpuType": "H100_SXM",
        "numGpus": config.get_int("numGpus") if config.get_int("numGpus") is not None else 8,
        "numPreemptibleGpus": config.get_int("numPreemptibleGpus") or 0,
        "nvidiaVersionId": "nv-570-cu128-ubuntu2204",
        "readyTimeoutMinutes": config.get_int("readyTimeoutMinutes") or 5,
        "status": None,
        "adoptClusterId": config.get("adoptClusterId"),
        "kubeConfig": None,
    },
)
pulumi.export("cluster_id", cluster.id)
pulumi.export("status", cluster.status)
"""

# A cluster on a volume of the same program: at preview the volume's id is not known yet.
PROGRAM_ON_A_VOLUME = """
import pulumi

volume = pulumi.CustomResource(
    "together:index:Volume",
    "data",
    {"volumeName": "native-data", "region": "us-central-8", "sizeTib": 1, "volumeId": None},
)
cluster = pulumi.CustomResource(
    "together:index:Cluster",
    "gpu",
    {
        "clusterName": "native-on-volume",
        "region": "us-central-8",
        "gpuType": "H100_SXM",
        "numGpus": 8,
        "nvidiaVersionId": "nv-570-cu128-ubuntu2204",
        "volumeId": volume.id,
    },
)
"""


class Stack(_engine.ProjectStack):
    """A Python project using the plugin ``together`` from ``Pulumi.yaml``'s ``plugins.providers``."""

    def __init__(
        self,
        workdir: Path,
        base_url: str,
        name: str = "native-engine",
        *,
        pulumi_home: Path | None = None,
        program: str = PROGRAM,
    ) -> None:
        self.dir = _engine.write_project(workdir / "project", name, program)
        self.env = _engine.engine_env(
            workdir, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY}
        )
        if pulumi_home is not None:  # the plugin from that plugin cache, not from Pulumi.yaml
            self.env["PULUMI_HOME"] = str(pulumi_home)
            self.run("stack", "init", "test", check=True)
            return
        with (self.dir / "Pulumi.yaml").open("a") as pulumi_yaml:
            pulumi_yaml.write(
                f"plugins:\n  providers:\n    - name: together\n      path: {json.dumps(str(PLUGIN_DIR))}\n"
            )
        self.run("stack", "init", "test", check=True)

    def cluster(self) -> dict:
        (resource,) = [
            r for r in _engine.stack_resources(self.dir, self.env) if r["type"] == "together:index:Cluster"
        ]
        return resource


@pytest.fixture(scope="module")
def proxy(emu):
    with FaultProxy(upstream=emu.base_url) as running:
        yield running


@pytest.fixture(scope="module")
def stack(proxy, tmp_path_factory):
    return Stack(tmp_path_factory.mktemp("native"), proxy.url)


def tg_create(emu, home: Path, name: str) -> Any:
    """A Ready cluster made outside Pulumi with the official command line, ``tg clusters create``, as a team
    that made its clusters with ``tg`` has them; the cluster as ``tg clusters retrieve`` shows it."""
    made = _run_tg(emu, home, "clusters", "create", "--name", name, "--num-gpus", "8", "--region", "us-central-8",
                   "--gpu-type", "H100_SXM", "--billing-type", "ON_DEMAND", "--nvidia-version-id", DRIVER,
                   key=API_KEY)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    created = json.loads(made.stdout)
    emu.admin.advance(3600)
    shown = _run_tg(emu, home, "clusters", "retrieve", created["cluster_id"], key=API_KEY)
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "Ready", (
        shown.stdout + shown.stderr
    )
    return SimpleNamespace(cluster_id=created["cluster_id"])


def _live(emu) -> list[dict]:
    return [c for c in emu.admin.clusters() if c["status"] != "Deleting"]


def test_preview_then_up_creates_the_cluster_with_a_secret_kube_config(stack, emu):
    preview = stack.run(*PREVIEW)
    assert preview.returncode == 0, _engine.output(preview)
    assert "together:index:Cluster" in preview.stdout and "create" in preview.stdout
    assert _live(emu) == []
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    outputs = stack.outputs()
    (live,) = _live(emu)
    assert outputs["cluster_id"] == live["cluster_id"] and outputs["status"] == "Ready"
    state = stack.cluster()
    assert state["inputs"]["numGpus"] == 8 and state["outputs"]["clusterName"] == "native-engine"
    # The kubeconfig is held encrypted, as the schema marks it secret.
    kube_config = state["outputs"]["kubeConfig"]
    assert isinstance(kube_config, dict) and "ciphertext" in kube_config, kube_config


def test_preemptible_gpus_change_in_place_with_one_put(stack, emu, proxy):
    cluster_id = stack.outputs()["cluster_id"]
    stack.config("numPreemptibleGpus", 8)
    preview = stack.run(*PREVIEW)
    assert preview.returncode == 0, _engine.output(preview)
    assert "update" in preview.stdout and "replace" not in preview.stdout, _engine.output(preview)
    before = len(proxy.requests)
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    puts = [r for r in proxy.requests[before:] if r[0] == "PUT"]
    assert puts == [("PUT", f"/v1/compute/clusters/{cluster_id}")], proxy.requests[before:]
    assert stack.outputs()["cluster_id"] == cluster_id
    (live,) = _live(emu)
    assert live["desired_preemptible_gpus"] == 8


def test_refresh_finds_no_change(stack):
    proc = stack.run("refresh", *_engine.UP_FLAGS, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    proc = stack.run(*PREVIEW, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)


def test_a_class_change_in_place_is_refused_at_preview_in_one_line_in_the_schemas_names(stack, emu, proxy):
    """Preemptible GPUs turned into standard ones in one update: the platform cannot convert a node's class, so
    the preview fails in one line that names the fields as the program writes them, and nothing is sent."""
    before = len(proxy.requests)
    stack.config("numGpus", 16)
    stack.config("numPreemptibleGpus", 0)
    try:
        preview = stack.run(*PREVIEW)
    finally:
        stack.config("numPreemptibleGpus", 8)
        stack.run("config", "rm", "numGpus", check=True)
    assert preview.returncode != 0
    text = _engine.output(preview)
    lines = [
        line.strip()
        for line in text.splitlines()
        if "cannot do" in line and line.strip().startswith("error:")
    ]
    assert len(lines) == 1, text
    assert "numGpus 8 -> 16 together with numPreemptibleGpus 8 -> 0" in lines[0], lines[0]
    assert "num_gpus" not in lines[0] and "num_preemptible_gpus" not in lines[0], lines[0]
    assert "Traceback" not in text and 'File "' not in text, text
    assert [r for r in proxy.requests[before:] if r[0] != "GET"] == []
    (live,) = _live(emu)
    assert (live["num_gpus"], live["desired_preemptible_gpus"]) == (8, 8)


def test_zero_standard_gpus_is_refused_at_preview_in_one_line(stack, emu):
    stack.config("numGpus", 0)
    try:
        preview = stack.run(*PREVIEW)
    finally:
        stack.run("config", "rm", "numGpus", check=True)
    assert preview.returncode != 0
    text = _engine.output(preview)
    # Diagnostics: one line naming the schema's field and the fix.
    refusal = "error: together:index:Cluster resource 'gpu': property numGpus value {0} has a problem: "
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith(refusal)]
    assert len(lines) == 1 and "at least one standard node" in lines[0], text
    assert "Traceback" not in text and 'File "' not in text, text


def test_destroy_deletes_the_cluster(stack, emu):
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    assert _live(emu) == []
    assert _engine.stack_resources(stack.dir, stack.env) == []


def test_a_cluster_made_with_tg_is_imported_into_a_python_project_and_then_unchanged(emu, tmp_path):
    created = tg_create(emu, tmp_path, "native-imported")
    stack = Stack(tmp_path, emu.base_url, name="native-import")
    stack.config("clusterName", "native-imported")
    stack.config("readyTimeoutMinutes", 60)  # the default, which an import records
    proc = stack.run(
        "import",
        "together:index:Cluster",
        "gpu",
        created.cluster_id,
        "--yes",
        "--generate-code=false",
        "--non-interactive",
        "--color",
        "never",
    )
    assert proc.returncode == 0, _engine.output(proc)
    state = stack.cluster()
    assert state["id"] == created.cluster_id and state["protect"] is True
    assert {k: state["inputs"][k] for k in ("clusterName", "region", "gpuType", "numGpus")} == {
        "clusterName": "native-imported",
        "region": "us-central-8",
        "gpuType": "H100_SXM",
        "numGpus": 8,
    }
    proc = stack.run(*PREVIEW, "--expect-no-changes", "--diff")
    assert proc.returncode == 0, _engine.output(proc)
    proc = stack.run(*UP, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    assert [c["cluster_id"] for c in _live(emu)] == [created.cluster_id]


def test_an_error_at_create_is_one_line(emu, tmp_path):
    before = _live(emu)
    stack = Stack(tmp_path, emu.base_url, name="native-error")
    stack.config("adoptClusterId", "c-missing")
    proc = stack.run(*UP)
    assert proc.returncode != 0
    text = _engine.output(proc)
    lines = [line.strip() for line in text.splitlines() if "no such live cluster" in line]
    assert lines and all(line.endswith("no such live cluster for this API key.") for line in lines), text
    assert "InputError: adopt_cluster_id 'c-missing'" in lines[-1], text
    assert "Traceback" not in text and 'File "' not in text, text
    assert _live(emu) == before


def test_plugin_install_puts_the_plugin_where_any_program_finds_it(emu, tmp_path):
    home = tmp_path / "pulumi-home"
    env = _engine.engine_env(tmp_path, extra={"PULUMI_HOME": str(home)})
    done = subprocess.run(
        [str(_engine.VENV / "bin" / "together-clusters"), "plugin", "install", "--pulumi", str(PULUMI_BIN)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (installed,) = (home / "plugins").glob("resource-together-v*/pulumi-resource-together")
    # The interpreter that ran the command, which has the package, is written into the launcher.
    (line,) = [line for line in installed.read_text().splitlines() if line.startswith("installed_python=")]
    assert line.startswith(f"installed_python={_engine.VENV}/bin/python"), line
    stack = Stack(tmp_path / "program", emu.base_url, name="native-cache", pulumi_home=home)
    preview = stack.run(*PREVIEW)
    assert preview.returncode == 0, _engine.output(preview)
    assert "together:index:Cluster" in preview.stdout


def test_an_input_unknown_at_preview_is_taken_as_unknown(emu, tmp_path):
    stack = Stack(tmp_path, emu.base_url, name="native-unknown", program=PROGRAM_ON_A_VOLUME)
    preview = stack.run(*PREVIEW, "--diff")
    assert preview.returncode == 0, _engine.output(preview)
    assert "together:index:Volume" in preview.stdout and "together:index:Cluster" in preview.stdout
    assert "volumeId" in preview.stdout and "[unknown]" in preview.stdout, _engine.output(preview)


PROGRAM_DATA = """
import pulumi

config = pulumi.Config()
volume = pulumi.CustomResource(
    "together:index:Volume",
    "data",
    {
        "volumeName": "native-kept",
        "region": "us-central-8",
        "sizeTib": 1,
        "allowDataLoss": config.get_bool("allowDataLoss") or False,
        "volumeId": None,
    },
)
cluster = pulumi.CustomResource(
    "together:index:Cluster",
    "gpu",
    {
        "clusterName": "native-inline",
        "region": "us-central-8",
        "gpuType": "H100_SXM",
        "numGpus": 8,
        "nvidiaVersionId": "nv-570-cu128-ubuntu2204",
        "readyTimeoutMinutes": 5,
        "sharedVolume": {"region": "us-central-8", "sizeTib": 1, "volumeName": "native-inline-ckpt"},
        "allowDataLoss": config.get_bool("allowDataLoss") or False,
    },
)
pulumi.export("volume_id", volume.id)
pulumi.export("cluster_id", cluster.id)
"""


def test_data_outlives_a_destroy_unless_the_code_allows_its_loss(emu, tmp_path):
    stack = Stack(tmp_path, emu.base_url, name="native-data", program=PROGRAM_DATA)
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    outputs = stack.outputs()
    # The cluster's inline volume would go with it: its delete is refused, in one line, naming the way out.
    destroy = stack.run("destroy", *_engine.UP_FLAGS)
    assert destroy.returncode != 0
    said = _engine.output(destroy)
    assert "'native-inline-ckpt' is not lifecycle-independent" in said and "allowDataLoss: true" in said, said
    assert "Traceback" not in said and 'File "' not in said, said
    assert outputs["cluster_id"] in [c["cluster_id"] for c in _live(emu)]
    # The Volume resource was deleted from the stack, its volume kept.
    kept = [v for v in emu.admin.volumes() if v["volume_id"] == outputs["volume_id"]]
    assert kept and kept[0]["status"] == "available", kept
    # Allowed, the destroy deletes the cluster and its inline volume.
    stack.config("allowDataLoss", "true")
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    assert outputs["cluster_id"] not in [c["cluster_id"] for c in _live(emu)]


class YamlExample(_engine.ProjectStack):
    """A copy of ``examples/yaml`` (a ``runtime: yaml`` project), the plugin named in its ``Pulumi.yaml``."""

    def __init__(self, workdir: Path, base_url: str) -> None:
        self.dir = workdir / "yaml"
        shutil.copytree(_engine.EXAMPLES / "yaml", self.dir)
        with (self.dir / "Pulumi.yaml").open("a") as pulumi_yaml:
            pulumi_yaml.write(
                f"plugins:\n  providers:\n    - name: together\n      path: {json.dumps(str(PLUGIN_DIR))}\n"
            )
        self.env = _engine.engine_env(
            workdir, extra={"TOGETHER_BASE_URL": base_url, "TOGETHER_API_KEY": API_KEY}
        )
        self.run("stack", "init", "test", check=True)


def test_the_yaml_example_previews_deploys_and_is_destroyed(emu, tmp_path):
    before = {c["cluster_id"] for c in _live(emu)}
    stack = YamlExample(tmp_path, emu.base_url)
    preview = stack.run(*PREVIEW)
    assert preview.returncode == 0, _engine.output(preview)
    assert "together:index:Volume" in preview.stdout and "together:index:Cluster" in preview.stdout
    assert {c["cluster_id"] for c in _live(emu)} == before
    proc = stack.run(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    outputs = stack.outputs()
    (live,) = [c for c in _live(emu) if c["cluster_id"] not in before]
    assert outputs["clusterId"] == live["cluster_id"] and live["desired_preemptible_gpus"] == 16
    assert outputs["volumeId"] in [v["volume_id"] for v in emu.admin.volumes()]
    proc = stack.run(*PREVIEW, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    proc = stack.run("destroy", *_engine.UP_FLAGS)
    assert proc.returncode == 0, _engine.output(proc)
    assert {c["cluster_id"] for c in _live(emu)} == before
    # The Volume resource left the stack; its volume is kept (allowDataLoss is not set).
    kept = [v for v in emu.admin.volumes() if v["volume_id"] == outputs["volumeId"]]
    assert kept and kept[0]["status"] == "available", kept


# A get of a cluster by id, under the imported code's ``resources`` (which it ends).
YAML_GET = """  existing:
    type: together:index:Cluster
    get:
      id: ${existingId}
config:
  existingId:
    type: string
outputs:
  status: ${existing.status}
  clusterName: ${existing.clusterName}
"""


def test_a_yaml_project_imports_a_cluster_made_with_tg_and_reads_one_with_get(emu, tmp_path):
    created = tg_create(emu, tmp_path, "yaml-imported")
    project = _engine.write_yaml_project(tmp_path / "project", "yaml-import")
    env = _engine.engine_env(tmp_path, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY})

    def pulumi(*args: str) -> subprocess.CompletedProcess[str]:
        return _engine.run_pulumi(list(args), cwd=project, env=env)

    pulumi("stack", "init", "test")
    generated = project / "generated.yaml"
    proc = pulumi(
        "import",
        "together:index:Cluster",
        "gpus",
        created.cluster_id,
        "--yes",
        "--non-interactive",
        "--color",
        "never",
        "--out",
        str(generated),
    )
    assert proc.returncode == 0, _engine.output(proc)
    code = generated.read_text()
    assert "clusterName: yaml-imported" in code and "numGpus: 8" in code and "protect: true" in code, code
    # The generated YAML, pasted into the program, changes nothing.
    _engine.write_yaml_project(project, "yaml-import", code)
    proc = pulumi(*PREVIEW, "--expect-no-changes", "--diff")
    assert proc.returncode == 0, _engine.output(proc)
    proc = pulumi(*UP, "--expect-no-changes")
    assert proc.returncode == 0, _engine.output(proc)
    # A get reads the same cluster by its id, without managing it.
    _engine.write_yaml_project(project, "yaml-import", code.rstrip("\n") + "\n" + YAML_GET)
    pulumi("config", "set", "existingId", created.cluster_id)
    proc = pulumi(*UP)
    assert proc.returncode == 0, _engine.output(proc)
    outputs = _engine.stack_outputs(project, env)
    assert outputs["status"] == "Ready" and outputs["clusterName"] == "yaml-imported", outputs
    assert created.cluster_id in [c["cluster_id"] for c in _live(emu)]


# A Cluster, a kubernetes provider from its kubeConfig, and a BatchJob on it (construct in the plugin).
YAML_BATCH_JOB = """resources:
  gpu:
    type: together:index:Cluster
    properties:
      clusterName: yaml-batch
      region: us-central-8
      gpuType: H100_SXM
      numGpus: 8
      numPreemptibleGpus: 8
      nvidiaVersionId: nv-570-cu128-ubuntu2204
      readyTimeoutMinutes: 5
  k8s:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${gpu.kubeConfig}
  ft:
    type: together:index:BatchJob
    properties:
      container:
        image: ghcr.io/example/finetune:1
        command: [python, train.py]
        gpus: 8
        env:
          HF_HOME: /checkpoints/hf
      checkpoint:
        sharedVolume:
          claimName: ft-ckpt
      pod:
        namespace: ml
        gracePeriodSeconds: GRACE
    options:
      providers:
        - ${k8s}
outputs:
  jobName: ${ft.jobName}
"""


def _yaml_batch_job(tmp_path: Path, base_url: str, grace: int) -> Path:
    body = YAML_BATCH_JOB.replace("GRACE", str(grace))
    return _engine.write_yaml_project(tmp_path / "project", "yaml-batch-job", body)


def test_a_yaml_batch_job_whose_layout_the_guard_refuses_fails_the_preview_in_one_line(emu, tmp_path):
    project = _yaml_batch_job(tmp_path, emu.base_url, grace=600)
    env = _engine.engine_env(tmp_path, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY})
    _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env)
    proc = _engine.run_pulumi(PREVIEW, cwd=project, env=env)
    said = _engine.output(proc)
    assert proc.returncode != 0, said
    # The progress line and the diagnostics say the same one line.
    (line,) = {x.split("error: ", 1)[-1] for x in said.splitlines() if "placement guard" in x}
    assert "PlacementRefused: BatchJob 'ft' refused by the preemptible placement guard" in line, said
    assert "terminationGracePeriodSeconds=600" in line, said
    assert "Traceback" not in said and 'File "' not in said, said


def test_a_yaml_batch_job_previews_its_kubernetes_objects(emu, tmp_path):
    project = _yaml_batch_job(tmp_path, emu.base_url, grace=60)
    env = _engine.engine_env(tmp_path, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY})
    _engine.run_pulumi(["stack", "init", "test"], cwd=project, env=env)
    proc = _engine.run_pulumi([*PREVIEW, "--json"], cwd=project, env=env)
    assert proc.returncode == 0, _engine.output(proc)
    steps = {
        (s["newState"]["type"], s["urn"].rsplit("::", 1)[-1]): s for s in json.loads(proc.stdout)["steps"]
    }
    assert steps[("together:index:BatchJob", "ft")]["op"] == "create"
    jobset = steps[("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", "ft-jobset-ft")]
    assert jobset["op"] == "create" and "together:index:BatchJob" in jobset["urn"]
    # The nested wire args reached the Python component: namespace, grace period, env, the claim mounted.
    rendered = jobset["newState"]["inputs"]
    assert rendered["metadata"]["namespace"] == "ml"
    (attempt,) = rendered["spec"]["replicatedJobs"]
    pod = attempt["template"]["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 60
    (container,) = pod["containers"]
    assert container["image"] == "ghcr.io/example/finetune:1" and container["command"] == [
        "python",
        "train.py",
    ]
    assert {"name": "HF_HOME", "value": "/checkpoints/hf"} in container["env"]
    assert {"claimName": "ft-ckpt"} in [v.get("persistentVolumeClaim") for v in pod["volumes"]]
    assert all(c["cluster_name"] != "yaml-batch" for c in emu.admin.clusters())
