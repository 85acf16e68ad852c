"""The contract between the Kubernetes manifests and the in-container runtime.

The components set these environment variables on workload containers; the runtime reads them.
Both sides import the names from here so they cannot drift apart.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass

GRACE_PERIOD_LIMIT_SECONDS = 300
"""A preempted node is deleted at the latest this many seconds after it is cordoned (sooner once its pods have
exited): the most a pod gets after SIGTERM. Its one home is here, in the runtime that training images install
alone; ``together_clusters.platform`` re-exports it."""

ENV_BACKEND = "CHECKPOINT_BACKEND"
"""``filesystem`` (the shared volume) or ``s3``."""
ENV_DIR = "CHECKPOINT_DIR"
"""Directory of this workload's checkpoints on the shared volume."""
ENV_S3_BUCKET = "CHECKPOINT_S3_BUCKET"
ENV_S3_PREFIX = "CHECKPOINT_S3_PREFIX"
ENV_S3_ENDPOINT = "CHECKPOINT_S3_ENDPOINT"
ENV_S3_ACCESS_KEY_ID = "AWS_ACCESS_KEY_ID"
ENV_S3_SECRET_ACCESS_KEY = "AWS_SECRET_ACCESS_KEY"
ENV_S3_REGION = "AWS_DEFAULT_REGION"
ENV_KEEP = "CHECKPOINT_KEEP"
"""How many complete checkpoints to keep."""
ENV_RESUME = "CHECKPOINT_RESUME"
"""``true``: on start, resume from the newest complete checkpoint."""
ENV_SAVE_BUDGET = "CHECKPOINT_SAVE_BUDGET_SECONDS"
"""Seconds the runtime may spend saving after SIGTERM; below the pod's grace period."""
ENV_DRAIN_BUDGET = "DRAIN_BUDGET_SECONDS"
"""Seconds a request worker may spend finishing its in-flight request after SIGTERM."""
ENV_RUN_KEYS_FILE = "CHECKPOINT_RUN_KEYS_FILE"
"""A JSON list: entry TRIAL_INDEX is this trial's run key, appended to its checkpoint location.

A run key names what defines the run (image, command, arguments, env, trial parameters) or the run id
the user gave, so a changed trial never resumes another trial's state and an unchanged one resumes.
"""
ENV_LEASE_HOLDER = "CHECKPOINT_LEASE_HOLDER"
"""Who this copy of the workload is, for the checkpoint lease (``lease.py``): the uid of its JobSet, or of its
Job, read from the pod's labels. Set for the workloads of a FleetQueue, whose copy on another worker is a new
object with a new uid; unset or empty, there is no lease."""
ENV_TRIAL_INDEX = "TRIAL_INDEX"
ENV_TRIAL_PARAMETERS_FILE = "TRIAL_PARAMETERS_FILE"
"""An Indexed Job's trials: a JSON list, entry TRIAL_INDEX is this pod's."""
ENV_TRIAL_PARAMETERS = "TRIAL_PARAMETERS"
"""A trial JobSet's own parameters, a JSON object (no file: a changed trial changes only its own pod)."""
ENV_COORDINATOR_HOST = "COORDINATOR_HOST"
ENV_COORDINATOR_PORT = "COORDINATOR_PORT"
ENV_WORKER_RANK = "WORKER_RANK"
"""A TrainingRun worker pod's index (its node's identity; torchrun assigns process ranks itself)."""
ENV_NUM_WORKERS = "NUM_WORKERS"
ENV_WORLD_SIZE = "WORLD_SIZE"
"""The number of training processes (torch's meaning): workers x processes per worker."""
ENV_RANK = "RANK"
"""A training process's global rank (set by torchrun for each process it starts)."""

BACKEND_FILESYSTEM = "filesystem"
BACKEND_S3 = "s3"

PREEMPTED_EXIT_CODE = 143
"""128 + SIGTERM: the runtime exits with this after saving, so a Job never counts the pod as complete."""

REPORT_PREFIX = "together_clusters.checkpoint:"
"""How every line the runtime writes to stderr starts; ``resumed step=<n>`` lines are read by drills."""


SAVED_REPORT = "saved checkpoint {name} at step {step}"
"""How a report of a written checkpoint starts (periodic saves and the one after SIGTERM): the remediation
gate reads the newest from a pod's log, timestamped by the kubelet, to show the age of its last checkpoint."""


def report(message: str) -> None:
    """One line on stderr whatever the logging setup, taking no lock another thread may hold.

    Drills read ``resumed step=<n> checkpoint=<name>`` from a replacement pod's log to say where a
    preempted run picked up.
    """
    try:
        os.write(2, f"{REPORT_PREFIX} {message}\n".encode())
    except OSError:
        pass


def report_resumed(step: int, checkpoint: str) -> None:
    """The line a drill looks for: the step a restarted pod resumed from."""
    report(f"resumed step={step} checkpoint={checkpoint}")


DEFAULT_KEEP = 3
MIN_EXIT_MARGIN_SECONDS = 10


def save_budget_seconds(grace_period_seconds: int) -> int:
    """Seconds the runtime may spend saving: the grace period less a margin to log and exit."""
    margin = max(MIN_EXIT_MARGIN_SECONDS, grace_period_seconds // 10)
    return max(1, grace_period_seconds - margin)


def drain_budget_seconds(grace_period_seconds: int, pre_stop_seconds: int) -> int:
    """Seconds a request worker has after SIGTERM, which arrives only once the preStop hook is done."""
    return save_budget_seconds(max(1, grace_period_seconds - pre_stop_seconds))


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class RuntimeConfig:
    """What the runtime was told through the environment."""

    backend: str = BACKEND_FILESYSTEM
    directory: str | None = None
    s3_bucket: str | None = None
    s3_prefix: str = ""
    s3_endpoint: str | None = None
    keep: int = DEFAULT_KEEP
    resume: bool = False
    save_budget_seconds: float = float(save_budget_seconds(GRACE_PERIOD_LIMIT_SECONDS))
    run_key: str | None = None
    lease_holder: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> RuntimeConfig:
        """Read the contract's variables; unset ones take the defaults."""
        budget = environ.get(ENV_SAVE_BUDGET)
        run_key = _run_key(environ)
        directory = environ.get(ENV_DIR)
        prefix = environ.get(ENV_S3_PREFIX, "")
        if run_key is not None:
            directory = posixpath.join(directory, run_key) if directory else None
            prefix = "/".join(p for p in (prefix.strip("/"), run_key) if p)
        return cls(
            run_key=run_key,
            backend=environ.get(ENV_BACKEND, BACKEND_FILESYSTEM),
            directory=directory,
            s3_bucket=environ.get(ENV_S3_BUCKET),
            s3_prefix=prefix,
            s3_endpoint=environ.get(ENV_S3_ENDPOINT) or None,
            keep=int(environ.get(ENV_KEEP, DEFAULT_KEEP)),
            resume=_truthy(environ.get(ENV_RESUME)),
            save_budget_seconds=float(budget) if budget else cls.save_budget_seconds,
            lease_holder=environ.get(ENV_LEASE_HOLDER) or None,
        )


def _run_key(environ: Mapping[str, str]) -> str | None:
    path = environ.get(ENV_RUN_KEYS_FILE)
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        keys = json.load(f)
    key: str = keys[int(environ[ENV_TRIAL_INDEX])]
    return key
