"""One way per argument: the workloads' flat keywords are deprecated for the nested groups.

Each flat keyword still works as before, with one ``DeprecationWarning`` naming the keyword and the nested
path to use instead, attributed to the caller's line (so Python shows it in a Pulumi program's ``__main__``);
the nested form warns nothing, and both build equal arguments. The flat keywords go in the next minor release.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest

from together_clusters.components import (
    BatchInferenceArgs,
    BatchJobArgs,
    ComputeClass,
    ContainerSpec,
    SharedVolume,
    SweepArgs,
    Taint,
    TrainingRunArgs,
)
from together_clusters.components.args import Checkpointing, NodePlacement, PodSettings, Retries

CONTAINER = ContainerSpec(image="ghcr.io/example/trainer:1.0", gpus=8)
SHARED = SharedVolume(claim_name="ckpt")
REQUIRED: dict[type, dict[str, Any]] = {
    BatchJobArgs: {"container": CONTAINER, "checkpoint": SHARED},
    SweepArgs: {"container": CONTAINER, "trials": ({"lr": 1e-5},), "checkpoint": SHARED},
    BatchInferenceArgs: {"container": CONTAINER},
    TrainingRunArgs: {"coordinator": CONTAINER, "worker": CONTAINER, "num_workers": 2, "checkpoint": SHARED},
}
# A value of each flat keyword that differs from every workload's default.
VALUES: dict[str, Any] = {
    "namespace": "ml",
    "compute_class": ComputeClass.STANDARD,
    "critical": True,
    "preemptible_taint": Taint("gpu.example.com/spot", "true"),
    "grace_period_seconds": 60,
    "service_account_name": "trainer",
    "labels": {"team": "ml"},
    "backoff_limit": 5,
    "backoff_limit_per_index": 5,
    "non_retriable_exit_codes": (42,),
    "fresh_job_per_attempt": False,
    "keep_checkpoints": 2,
    "run_id": "ft-1",
}
GROUPS = {"placement": NodePlacement, "pod": PodSettings, "retries": Retries, "checkpointing": Checkpointing}
PLACEMENT = ("placement", ("compute_class", "critical", "preemptible_taint"))
POD = ("pod", ("namespace", "grace_period_seconds", "service_account_name", "labels"))
RETRIES = ("retries", ("backoff_limit", "non_retriable_exit_codes", "fresh_job_per_attempt"))
CHECKPOINTING = ("checkpointing", ("keep_checkpoints", "run_id"))


def _cases() -> list[tuple[type, str, str, str, dict[str, Any]]]:
    """Each (class, flat keyword, its group, its name there, what else the group must say to keep the workload's defaults)."""
    layout: dict[type, list[tuple[str, tuple[str, ...]]]] = {
        BatchJobArgs: [PLACEMENT, POD, RETRIES, CHECKPOINTING],
        SweepArgs: [PLACEMENT, POD, RETRIES, CHECKPOINTING],
        BatchInferenceArgs: [PLACEMENT, POD],
        TrainingRunArgs: [POD, RETRIES, CHECKPOINTING],
    }
    # A group given whole starts from its own defaults: where a workload's own differ, the nested path says so.
    kept = {
        (SweepArgs, "retries"): {"backoff_limit": 2},
        (BatchInferenceArgs, "pod"): {"grace_period_seconds": 120},
    }
    cases = []
    for cls, groups in layout.items():
        for group, names in groups:
            for name in names:
                flat = "backoff_limit_per_index" if (cls, name) == (SweepArgs, "backoff_limit") else name
                extra = {k: v for k, v in kept.get((cls, group), {}).items() if k != name}
                cases.append((cls, flat, group, name, extra))
    return cases


CASES = _cases()


def _nested_path(cls: type, group: str, name: str, extra: dict[str, Any]) -> str:
    inner = ", ".join([f"{name}=...", *(f"{k}={v!r}" for k, v in extra.items())])
    return f"{cls.__name__}({group}={GROUPS[group].__name__}({inner}))"


def test_every_flat_keyword_is_covered() -> None:
    for cls in REQUIRED:
        assert {flat for c, flat, *_ in CASES if c is cls} == set(cls.FLAT_KEYWORDS)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("cls", "flat", "group", "name", "extra"), CASES, ids=[f"{c.__name__}-{flat}" for c, flat, *_ in CASES]
)
def test_a_flat_keyword_warns_once_naming_its_nested_path_and_builds_the_nested_args(
    cls: type, flat: str, group: str, name: str, extra: dict[str, Any]
) -> None:
    value = VALUES[flat]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from_flat = cls(**REQUIRED[cls], **{flat: value})  # the line the warning points at
    line = _line_of("the line the warning points at")

    assert [(w.category, str(w.message)) for w in caught] == [
        (
            DeprecationWarning,
            f"{cls.__name__}({flat}=...) is deprecated: use {_nested_path(cls, group, name, extra)}"
            + (
                f" ({', '.join(f'{k}={v!r}' for k, v in extra.items())} keeps {cls.__name__}' default)"
                if extra
                else ""
            ),
        )
    ]
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from_nested = cls(**REQUIRED[cls], **{group: GROUPS[group](**{name: value, **extra})})
    assert from_nested == from_flat
    assert getattr(from_nested, group) == getattr(from_flat, group) != getattr(cls(**REQUIRED[cls]), group)


def test_the_nested_forms_warn_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        args = BatchJobArgs(
            CONTAINER,
            SHARED,
            placement=NodePlacement(ComputeClass.STANDARD, critical=True),
            pod=PodSettings(namespace="ml", grace_period_seconds=60),
            retries=Retries(backoff_limit=5, fresh_job_per_attempt=False),
            checkpointing=Checkpointing(run_id="ft-1"),
        )
        for cls in REQUIRED:
            cls(**REQUIRED[cls])
        # Reading a value back by its flat name stays quiet, and so does replace() by a group.
        assert (args.compute_class, args.namespace, args.backoff_limit) == (ComputeClass.STANDARD, "ml", 5)
        moved = dataclasses.replace(args, placement=dataclasses.replace(args.placement, critical=False))
    assert moved.placement == NodePlacement(ComputeClass.STANDARD, critical=False)
    assert (moved.pod, moved.retries, moved.checkpointing) == (args.pod, args.retries, args.checkpointing)


def test_a_group_swapped_by_replace_is_kept_whole() -> None:
    args = BatchJobArgs(CONTAINER, SHARED, pod=PodSettings(namespace="ml"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        swapped = dataclasses.replace(args, pod=PodSettings(namespace="serve", service_account_name="sa"))
    assert swapped.pod == PodSettings(namespace="serve", service_account_name="sa")


def test_replace_by_a_flat_keyword_warns_naming_the_nested_replace_and_changes_that_value_only() -> None:
    args = BatchJobArgs(CONTAINER, SHARED, pod=PodSettings(namespace="ml"), retries=Retries(backoff_limit=5))
    with pytest.warns(DeprecationWarning) as caught:
        changed = dataclasses.replace(args, fresh_job_per_attempt=False)  # the replace line
    assert [str(w.message) for w in caught] == [
        "dataclasses.replace(BatchJobArgs, fresh_job_per_attempt=...) is deprecated: use "
        "dataclasses.replace(args, retries=dataclasses.replace(args.retries, fresh_job_per_attempt=...))"
    ]
    assert (caught[0].filename, caught[0].lineno) == (__file__, _line_of("the replace line"))
    assert changed.retries == Retries(backoff_limit=5, fresh_job_per_attempt=False)
    assert changed.pod.namespace == "ml"


def test_each_flat_keyword_given_warns_once() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flat = BatchJobArgs(
            CONTAINER, SHARED, namespace="ml", compute_class=ComputeClass.STANDARD, run_id="r"
        )
    assert [str(w.message).split(" is deprecated")[0] for w in caught] == [
        "BatchJobArgs(namespace=...)",
        "BatchJobArgs(compute_class=...)",
        "BatchJobArgs(run_id=...)",
    ]
    assert flat == BatchJobArgs(
        CONTAINER,
        SHARED,
        placement=NodePlacement(ComputeClass.STANDARD),
        pod=PodSettings(namespace="ml"),
        checkpointing=Checkpointing(run_id="r"),
    )


def test_python_shows_the_warning_in_a_programs_main() -> None:
    """Python's default filters show a DeprecationWarning only when it is attributed to ``__main__``."""
    program = "from together_clusters.components import *\nBatchInferenceArgs(ContainerSpec(image='x'), namespace='ml')\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()  # then Python's defaults (the one added last is tried first)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
        exec(compile(program, "__main__.py", "exec"), {"__name__": "__main__"})
    assert [(w.filename, w.lineno) for w in caught] == [("__main__.py", 2)]


def _line_of(marker: str) -> int:
    """The line of this file that holds ``marker`` after a ``#``."""
    with open(__file__, encoding="utf-8") as source:
        for number, text in enumerate(source, start=1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise AssertionError(marker)
