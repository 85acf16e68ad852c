"""Who is calling: every API key is its own owner (project). The key itself is never stored or shown."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    owner: str
    default_project_id: str


def caller_for_key(api_key: str) -> Caller:
    """The owner behind an API key: a digest of the key, and a project id derived from it."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()
    return Caller(owner=digest, default_project_id=f"proj-{digest[:12]}")
