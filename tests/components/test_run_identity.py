"""Checkpoint identity: the rendered pods, started as the kubelet would start them, against the real runtime.

A pod's environment is built from the rendered manifest (``$(VAR)`` references expanded, the completion
index from the Job controller's annotation) and its mounts are mapped into a temporary directory.
Then the real :class:`Checkpointer` saves as one run and restores as another.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from together_clusters.components import (
    BatchJobArgs,
    Checkpointing,
    ContainerSpec,
    Retries,
    SharedVolume,
    SweepArgs,
    manifests,
)
from together_clusters.components.checkpoint import Checkpointer, trial_parameters

from .helpers import main_container, pod_spec

IMAGE = "ghcr.io/example/trainer:1.0"
SHARED = SharedVolume(claim_name="ckpt")


class Kubelet:
    """Just enough of a kubelet to start a rendered container's environment: mounts and env."""

    def __init__(self, root: Path, config_maps: dict[str, dict[str, str]]) -> None:
        self.root = root
        self.config_maps = config_maps

    def environment(self, job: dict[str, Any], index: int = 0) -> dict[str, str]:
        spec = pod_spec(job)
        container = main_container(job)
        mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
        for volume in spec.get("volumes", []):
            local = self.root / volume["name"]
            local.mkdir(parents=True, exist_ok=True)
            if "configMap" in volume:
                for file_name, text in self.config_maps[volume["configMap"]["name"]].items():
                    (local / file_name).write_text(text)
        env: dict[str, str] = {}
        for entry in container.get("env", []):
            if "value" in entry:
                value = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), entry["value"])
            elif "fieldRef" in entry.get("valueFrom", {}):
                value = str(index)  # the completion index annotation
            else:
                continue
            for name, path in mounts.items():
                if value.startswith(path):
                    value = str(self.root / name) + value[len(path) :]
            env[entry["name"]] = value
        return env


def batch_env(kubelet: Kubelet, **container: Any) -> dict[str, str]:
    args = BatchJobArgs(container=ContainerSpec(image=IMAGE, **container), checkpoint=SHARED)
    (job,) = manifests.batch_job("ft", args)
    return kubelet.environment(job)


def test_a_batch_job_resumes_its_own_run_and_a_changed_one_starts_fresh(tmp_path: Path) -> None:
    kubelet = Kubelet(tmp_path, {})
    original = {"args": ("--lr", "3e-4")}
    Checkpointer.from_env(batch_env(kubelet, **original)).save(40, {"state": b"step 40"})

    same = Checkpointer.from_env(batch_env(kubelet, **original)).restore()
    assert same is not None and same.step == 40 and same.files["state"] == b"step 40"

    for changed in (
        {"args": ("--lr", "1e-3")},
        {"image": "ghcr.io/example/trainer:2.0"},
        {"env": {"SEED": "2"}},
    ):
        container = {**original, **changed}
        image = container.pop("image", IMAGE)
        args = BatchJobArgs(container=ContainerSpec(image=image, **container), checkpoint=SHARED)
        (job,) = manifests.batch_job("ft", args)
        assert Checkpointer.from_env(kubelet.environment(job)).restore() is None, changed


def test_an_explicit_run_id_resumes_across_changes(tmp_path: Path) -> None:
    kubelet = Kubelet(tmp_path, {})

    def env(image: str) -> dict[str, str]:
        args = BatchJobArgs(
            container=ContainerSpec(image=image),
            checkpoint=SHARED,
            checkpointing=Checkpointing(run_id="llama-ft-1"),
        )
        return kubelet.environment(manifests.batch_job("ft", args)[0])

    Checkpointer.from_env(env(IMAGE)).save(7, {"state": b"seven"})
    resumed = Checkpointer.from_env(env("ghcr.io/example/trainer:1.0.1")).restore()
    assert resumed is not None and resumed.step == 7


def sweep_envs(tmp_path: Path, trials: tuple[dict[str, Any], ...], fresh: bool) -> list[dict[str, str]]:
    """Each trial pod's environment: of its own JobSet, or of the Indexed Job at its completion index."""
    rendered = manifests.sweep(
        "lr",
        SweepArgs(
            ContainerSpec(IMAGE),
            trials,
            SHARED,
            retries=Retries(backoff_limit=2, fresh_job_per_attempt=fresh),
        ),
    )
    if fresh:
        return [Kubelet(tmp_path, {}).environment(job_set) for job_set in rendered]
    config_map, job = rendered
    kubelet = Kubelet(tmp_path, {config_map["metadata"]["name"]: config_map["data"]})
    return [kubelet.environment(job, index) for index in range(len(trials))]


LAYOUTS = pytest.mark.parametrize("fresh", [True, False], ids=["job-set-per-trial", "indexed-job"])


@LAYOUTS
def test_a_sweep_trial_whose_parameters_change_starts_fresh_and_the_others_resume(
    tmp_path: Path, fresh: bool
) -> None:
    before = ({"lr": 1e-4}, {"lr": 3e-4}, {"lr": 1e-3})
    for index, env in enumerate(sweep_envs(tmp_path, before, fresh)):
        Checkpointer.from_env(env).save(10 + index, {"trial": str(before[index]).encode()})
        assert trial_parameters(env) == before[index]

    after = ({"lr": 1e-4}, {"lr": 5e-4}, {"lr": 1e-3})
    restored = [Checkpointer.from_env(env).restore() for env in sweep_envs(tmp_path, after, fresh)]
    assert restored[1] is None, "trial 1 changed its learning rate but resumed the old trial's state"
    assert restored[0] is not None and restored[0].files["trial"] == str(before[0]).encode()
    assert restored[2] is not None and restored[2].step == 12


@LAYOUTS
def test_reordered_trials_keep_their_own_checkpoints_only_by_index(tmp_path: Path, fresh: bool) -> None:
    # A trial that moves to another index is a different trial there: it must not resume the old occupant.
    first = ({"lr": 1e-4}, {"lr": 3e-4})
    for index, env in enumerate(sweep_envs(tmp_path, first, fresh)):
        Checkpointer.from_env(env).save(5, {"trial": str(first[index]).encode()})
    swapped = [Checkpointer.from_env(env).restore() for env in sweep_envs(tmp_path, first[::-1], fresh)]
    assert swapped == [None, None]
