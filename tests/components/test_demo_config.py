"""The examples' cluster (``components.demo``) reads its stack config through the one reader of the cluster keys
(``provider/stack_config.py``): the same keys, ``adoptClusterId`` and ``adoptClusterIds`` included, with the
examples' defaults."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from together_clusters.components import demo
from together_clusters.provider.settings import ADOPT_CONFIG_KEY, ADOPT_MANY_CONFIG_KEY
from together_clusters.provider.stack_config import adopted_cluster_id


class StackConfig:
    """``pulumi.Config`` of a stack whose config holds ``values``."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def get_object(self, key: str) -> Any:
        return json.loads(self.values[key]) if key in self.values else None

    def require(self, key: str) -> str:
        if key not in self.values:
            raise KeyError(key)
        return self.values[key]


def declared_args(monkeypatch: pytest.MonkeyPatch, config: dict[str, str]) -> Any:
    declared: dict[str, Any] = {}
    monkeypatch.setattr(demo.pulumi, "Config", lambda: StackConfig(config))
    monkeypatch.setattr(demo.pulumi, "get_stack", lambda: "dev")
    monkeypatch.setattr(demo, "Cluster", lambda name, args: declared.setdefault("args", args))
    monkeypatch.setattr(demo, "provider_from_stack_config", lambda cluster: None)
    demo.demo_cluster("sweep", num_preemptible_gpus=16)
    return declared["args"]


def test_the_examples_cluster_takes_the_adoption_key_like_every_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = declared_args(monkeypatch, {ADOPT_CONFIG_KEY: "c-untracked"})
    assert args.adopt_cluster_id == "c-untracked"
    assert (args.cluster_name, args.region, args.gpu_type) == (
        "sweep-dev",
        demo.DEFAULT_REGION,
        demo.DEFAULT_GPU_TYPE,
    )
    assert (args.num_gpus, args.num_preemptible_gpus) == (8, 16)


def test_the_examples_cluster_takes_name_region_and_gpu_type_from_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = declared_args(monkeypatch, {"clusterName": "mine", "region": "us-east-2", "gpuType": "L40_PCIE"})
    assert (args.cluster_name, args.region, args.gpu_type, args.adopt_cluster_id) == (
        "mine",
        "us-east-2",
        "L40_PCIE",
        None,
    )


def test_in_a_stack_of_several_clusters_each_adopts_only_its_own_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the rerun's error names for a stack of several clusters (``--path adoptClusterIds.<name>``): the
    cluster of that name adopts its id, another cluster nothing."""
    entries = json.dumps({"sweep-dev": "c-mine", "fleet-hub-dev": "c-hub"})
    args = declared_args(monkeypatch, {ADOPT_MANY_CONFIG_KEY: entries})
    assert args.adopt_cluster_id == "c-mine"
    config: Any = StackConfig({ADOPT_MANY_CONFIG_KEY: entries})
    assert adopted_cluster_id(config, "fleet-hub-dev") == "c-hub"
    assert adopted_cluster_id(config, "fleet-east-dev") is None


def test_an_adoption_map_that_is_not_an_object_is_refused_naming_the_key_and_the_fix() -> None:
    config: Any = StackConfig({ADOPT_MANY_CONFIG_KEY: json.dumps(["c-1"])})
    with pytest.raises(pulumi.RunError) as refused:
        adopted_cluster_id(config, "fleet-hub-dev")
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{ADOPT_MANY_CONFIG_KEY}: ['c-1'] is not an object")
    assert f"pulumi config set --path {ADOPT_MANY_CONFIG_KEY}.<cluster_name> <id>" in message
