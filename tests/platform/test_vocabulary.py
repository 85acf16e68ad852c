"""The platform's vocabulary (together_clusters.platform) against the official SDK, the independent oracle."""

from __future__ import annotations

import inspect
import re

import pytest
from together.types import cluster as sdk_cluster
from together.types import cluster_create_params as sdk_create

from together_clusters.emulator import catalog
from together_clusters.platform import (
    GPUS_PER_NODE,
    ComputeClass,
    LifecycleReason,
    compute_class_of_node,
    is_preemption,
)


def test_the_node_size_is_the_sdks_multiple_in_the_product_and_in_the_emulator() -> None:
    # The SDK: num_gpus "must be multiple of 8"; the emulator keeps its own copy on purpose (see catalog.py).
    multiples = {int(m) for m in re.findall(r"multiple of (\d+)", inspect.getsource(sdk_create))}
    assert multiples == {GPUS_PER_NODE}
    assert catalog.GPUS_PER_NODE == GPUS_PER_NODE


def test_every_reason_the_sdk_names_is_in_the_vocabulary() -> None:
    source = inspect.getsource(sdk_cluster.NodeLifecycleEvent)
    named = set(re.findall(r"\bTogether[A-Z]\w+", source))
    assert named == {"TogetherScaledUp", "TogetherScaledDown", "TogetherPreempted"}
    assert named <= {r.value for r in LifecycleReason}


def test_the_documented_reasons_keep_their_names() -> None:
    assert LifecycleReason.PREEMPTED == "TogetherPreempted"
    assert LifecycleReason.PREEMPTION_NOTIFIED == "TogetherPreemptionNotified"
    assert LifecycleReason.NODE_ADDED == "TogetherNodeAdded"
    assert LifecycleReason.SCALED_UP == "TogetherScaledUp"
    assert LifecycleReason.SCALED_DOWN == "TogetherScaledDown"


@pytest.mark.parametrize("reason", ["TogetherPreempted", "TogetherPreemptionNotified"])
def test_both_names_of_a_preemption_are_a_preemption(reason: str) -> None:
    assert is_preemption(reason)


@pytest.mark.parametrize("reason", ["TogetherScaledUp", "TogetherScaledDown", "TogetherNodeAdded", "", None])
def test_other_reasons_are_not_a_preemption(reason: str | None) -> None:
    assert not is_preemption(reason)


@pytest.mark.parametrize(
    ("name", "compute_class"),
    [
        ("gpu-dp-7f3a2", ComputeClass.STANDARD),
        ("gpu-preemptible-dp-7f3a2", ComputeClass.PREEMPTIBLE),
        ("control-plane-0", None),
        ("cpu-dp-1", None),
    ],
)
def test_a_node_name_tells_its_class(name: str, compute_class: ComputeClass | None) -> None:
    assert compute_class_of_node(name) is compute_class
