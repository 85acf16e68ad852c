"""Run keys: where a run's checkpoints live under its workload, so only the same run resumes from them."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from ..args import ContainerSpec
from .common import RUN_KEY_DIGEST_CHARS, Manifest


def run_key(run_id: str | None, *definition: Any) -> str:
    """Where a run's checkpoints live under its workload: ``run_id`` if given, else a digest of what defines it.

    Only a run with the same definition resumes from these checkpoints; any change starts fresh.
    """
    if run_id is not None:
        return run_id
    canonical = json.dumps(definition, sort_keys=True, default=_canonical)
    if INPUT_MARK in canonical:
        # A value is only known once Pulumi resolves it: digest the resolved text (inputs.py).
        return f"{DEFERRED_DIGEST_START}{canonical}{DEFERRED_DIGEST_END}"
    return _run_digest(canonical)


INPUT_MARK = "@@pulumi-input-"
"""How a placeholder for a ``pulumi.Input`` starts (see :mod:`.inputs`)."""
DEFERRED_DIGEST_START = "@@run-digest<<"
DEFERRED_DIGEST_END = ">>run-digest@@"
_DEFERRED_DIGEST = re.compile(
    re.escape(DEFERRED_DIGEST_START) + "(.*?)" + re.escape(DEFERRED_DIGEST_END), re.S
)


def run_id_names_a_directory(run_id: str) -> bool:
    """Whether ``run_id`` can name one directory (or key prefix) under its workload's checkpoints."""
    return bool(run_id) and not run_id.startswith(".") and "/" not in run_id and run_id == run_id.strip()


def _run_digest(canonical: str) -> str:
    return "run-" + hashlib.sha256(canonical.encode()).hexdigest()[:RUN_KEY_DIGEST_CHARS]


def finish_deferred_digests(text: str) -> str:
    """Replace each deferred run digest, now that the values in it are resolved, by the digest."""
    return _DEFERRED_DIGEST.sub(lambda m: _run_digest(m.group(1)), text)


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"cannot key a run on {type(value).__name__}")


def run_definition(spec: ContainerSpec) -> Manifest:
    """The parts of a container that define what a run computes."""
    return {
        "image": spec.image,
        "command": list(spec.command),
        "args": list(spec.args),
        "env": dict(spec.env),
    }
