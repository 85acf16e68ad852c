"""The examples' cluster (``components.demo``) reads its stack config through the one reader of the cluster keys
(``provider/stack_config.py``): the same keys, ``adoptClusterId`` included, with the examples' defaults."""

from __future__ import annotations

from typing import Any

import pytest

from together_clusters.components import demo
from together_clusters.provider.settings import ADOPT_CONFIG_KEY


class StackConfig:
    """``pulumi.Config`` of a stack whose config holds ``values``."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        return self.values.get(key)

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


def test_the_examples_cluster_takes_the_adoption_key_like_every_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    args = declared_args(monkeypatch, {ADOPT_CONFIG_KEY: "c-untracked"})
    assert args.adopt_cluster_id == "c-untracked"
    assert (args.cluster_name, args.region, args.gpu_type) == (
        "sweep-dev",
        demo.DEFAULT_REGION,
        demo.DEFAULT_GPU_TYPE,
    )
    assert (args.num_gpus, args.num_preemptible_gpus) == (8, 16)


def test_the_examples_cluster_takes_name_region_and_gpu_type_from_config(monkeypatch: pytest.MonkeyPatch) -> None:
    args = declared_args(monkeypatch, {"clusterName": "mine", "region": "us-east-2", "gpuType": "L40_PCIE"})
    assert (args.cluster_name, args.region, args.gpu_type, args.adopt_cluster_id) == (
        "mine",
        "us-east-2",
        "L40_PCIE",
        None,
    )
