"""Read the resources out of a ``pulumi stack export`` document. Pure.

An export is ``{"version": 3, "deployment": {"resources": [...]}}``; each resource carries its ``urn``,
``type``, ``id``, ``inputs``, ``outputs`` and the engine's ``modified`` time. Secret values stay in their encrypted envelope: they are
never decrypted here and never compared (their ciphertext changes on every write).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pulumi.runtime.rpc import _special_secret_sig as SECRET_MARK
from pulumi.runtime.rpc import _special_sig_key as SECRET_SIG

from together_clusters.provider.plan_types import parse_time
from together_clusters.provider.schema import CLUSTER_TYPE

# The engine's secret marker, from its SDK (the one home of the fact; the SDK is pinned): a secret is a map
# whose SECRET_SIG key holds SECRET_MARK. The SDK keeps both names private and has no public spelling for
# them. (A value unknown in a preview is pulumi.runtime.rpc.UNKNOWN.)

# Resources that are the engine's bookkeeping rather than infrastructure.
_BOOKKEEPING_TYPES = ("pulumi:pulumi:Stack",)
_BOOKKEEPING_PREFIXES = ("pulumi:providers:",)


@dataclass(frozen=True)
class StateResource:
    """One managed resource of a stack's state."""

    urn: str
    type: str
    id: str
    inputs: dict[str, Any] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    #: When the engine last changed this resource's state (an update, or a refresh that saw a change).
    modified: datetime | None = None

    @property
    def name(self) -> str:
        """The logical name given in code (the URN's last segment)."""
        return self.urn.rsplit("::", 1)[-1]

    @property
    def is_cluster(self) -> bool:
        return self.type == CLUSTER_TYPE


def is_secret(value: Any) -> bool:
    """Whether ``value`` is the engine's envelope of a secret (encrypted or shown)."""
    return isinstance(value, Mapping) and value.get(SECRET_SIG) == SECRET_MARK


def is_bookkeeping(resource_type: str) -> bool:
    """The stack itself and provider instances: not infrastructure anyone could change by hand."""
    return resource_type in _BOOKKEEPING_TYPES or resource_type.startswith(_BOOKKEEPING_PREFIXES)


def managed_resources(export: Mapping[str, Any]) -> list[StateResource]:
    """The custom resources of an export (or of its ``deployment``), in state order.

    Component resources (no ``custom``) and bookkeeping are left out, and so are resources pending
    deletion: they are on their way out and say nothing about what the code manages.
    """
    deployment = export.get("deployment", export)
    found = []
    for raw in deployment.get("resources") or []:
        if not raw.get("custom") or is_bookkeeping(raw.get("type", "")) or raw.get("delete"):
            continue
        found.append(
            StateResource(
                urn=raw["urn"],
                type=raw["type"],
                id=str(raw.get("id") or ""),
                inputs=dict(raw.get("inputs") or {}),
                outputs=dict(raw.get("outputs") or {}),
                modified=parse_time(raw.get("modified")),
            )
        )
    return found


def clusters(export: Mapping[str, Any]) -> list[StateResource]:
    """The Together ``Cluster`` resources of an export."""
    return [r for r in managed_resources(export) if r.is_cluster]


def short_type(resource_type: str) -> str:
    """A type token as people read it: ``pulumi-python:dynamic/together_clusters:Cluster`` -> ``together_clusters:Cluster``."""
    return (
        resource_type.rsplit("/", 1)[-1]
        if resource_type.startswith("pulumi-python:dynamic/")
        else resource_type
    )
