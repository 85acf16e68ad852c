"""Who is calling: every API key is its own project (and organization). The key itself is never stored or shown."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel


@dataclass(frozen=True)
class Caller:
    """The identity behind one API key. Every id is derived from a digest of the key, never from the key."""

    owner: str
    default_project_id: str
    organization_id: str
    api_key_id: str


def caller_for_key(api_key: str) -> Caller:
    """The owner behind an API key: a digest of the key, and a project and organization derived from it."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()
    return Caller(
        owner=digest,
        default_project_id=f"proj-{digest[:12]}",
        organization_id=f"org-{digest[12:24]}",
        api_key_id=f"key-{digest[24:36]}",
    )


class WhoamiAPIKey(BaseModel):
    id: str


class WhoamiOrganization(BaseModel):
    id: str
    name: str


class WhoamiProject(BaseModel):
    id: str
    name: str
    slug: str


class WhoamiProjectAPIKey(BaseModel):
    """``GET /v3/whoami`` for a project API key (the SDK's ``WhoamiProjectAPIKey``)."""

    type: Literal["project_api_key"] = "project_api_key"
    api_key: WhoamiAPIKey
    organization: WhoamiOrganization
    project: WhoamiProject


def whoami(caller: Caller) -> WhoamiProjectAPIKey:
    """The caller's identity: its API key, organization and project (the project its clusters get)."""
    return WhoamiProjectAPIKey(
        api_key=WhoamiAPIKey(id=caller.api_key_id),
        organization=WhoamiOrganization(
            id=caller.organization_id, name=f"Emulated organization {caller.organization_id}"
        ),
        project=WhoamiProject(
            id=caller.default_project_id,
            name=f"Emulated project {caller.default_project_id}",
            # The project id is already lowercase letters, digits and dashes: DNS-friendly.
            slug=caller.default_project_id,
        ),
    )
