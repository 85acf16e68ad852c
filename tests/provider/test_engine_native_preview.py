"""The preview of an in-place change through the plugin shows what the update will do, and no more.

A YAML program makes its ``kubernetes`` provider from the cluster's ``kubeConfig`` (here one with no objects:
the emulator's kubeconfig reaches no API server). An update of
``numPreemptibleGpus`` keeps the cluster, its id and its kubeconfig; the preview must say so: were the
kubeconfig shown unknown, the provider would show as replaced, and every Kubernetes object on it with it
(a preview of one scale-up reading as a rebuild of the whole stack). The plugin previews an update as the
Terraform plugin framework's ``UseStateForUnknown`` does: the outputs an update in place keeps (id, endpoint,
kubeconfig, creation time) carry their old values; the ones it changes (counts, status) are unknown.

Oracles: the real engine and YAML host, ``pulumi preview --json``'s steps, the emulator.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import _engine

pytestmark = pytest.mark.engine

API_KEY = "tgp_v1_engine-native-preview-01234"

PROGRAM = """resources:
  gpu:
    type: together:index:Cluster
    properties:
      clusterName: yaml-preview
      region: us-central-8
      gpuType: H100_SXM
      numGpus: 8
      numPreemptibleGpus: ${numPreemptibleGpus}
      nvidiaVersionId: nv-570-cu128-ubuntu2204
  k8s:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${gpu.kubeConfig}
config:
  numPreemptibleGpus:
    type: integer
outputs:
  clusterId: ${gpu.clusterId}
  status: ${gpu.status}
"""


def _ops(preview: Any) -> dict[str, str]:
    return {s["urn"].rsplit("::", 1)[-1]: s["op"] for s in json.loads(preview.stdout)["steps"]}


def test_a_previewed_scale_change_keeps_the_clusters_kubeconfig_so_nothing_on_it_is_replaced(
    emu, tmp_path
) -> None:
    project = _engine.write_yaml_project(tmp_path / "project", "yaml-preview", PROGRAM)
    env = _engine.engine_env(tmp_path, extra={"TOGETHER_BASE_URL": emu.base_url, "TOGETHER_API_KEY": API_KEY})
    pulumi = _engine.pulumi_in(project, env)
    pulumi("stack", "init", "test")
    pulumi("config", "set", "numPreemptibleGpus", "8")
    pulumi("up", *_engine.UP_FLAGS)

    pulumi("config", "set", "numPreemptibleGpus", "16")
    preview = _engine.run_pulumi(["preview", "--json", *_engine.PREVIEW_FLAGS], cwd=project, env=env)
    assert preview.returncode == 0, _engine.output(preview)
    ops = _ops(preview)
    assert ops["gpu"] == "update", ops
    # A provider unchanged has no step of its own; a replaced one had "replace" here.
    assert ops.get("k8s", "same") == "same", ops  # a replaced provider replaces every object made through it

    pulumi("up", *_engine.UP_FLAGS)
    pulumi("preview", "--expect-no-changes", *_engine.PREVIEW_FLAGS)
