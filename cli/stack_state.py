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

from together_clusters.provider.package_schema import CLUSTER_TOKEN, VOLUME_TOKEN, camel, snake
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
        """A Together cluster, through either front door: the dynamic provider's or the plugin's."""
        return self.type in (CLUSTER_TYPE, CLUSTER_TOKEN)


# The plugin's resources hold the schema's camelCase names (``numGpus``) where the dynamic provider's hold the
# rules' snake_case ones (``num_gpus``): read, both are the same fields, in the rules' names.
_NATIVE_TYPES = frozenset({CLUSTER_TOKEN, VOLUME_TOKEN})


def in_rule_names(resource_type: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """A resource's inputs or outputs with the rules' snake_case names, nested objects too (a secret's envelope
    is left whole). Only the plugin's types are renamed: another provider's names are its own."""
    if resource_type not in _NATIVE_TYPES:
        return dict(values)
    return {snake(key): _renamed(value) for key, value in values.items()}


def _renamed(value: Any) -> Any:
    if isinstance(value, Mapping) and not is_secret(value):
        return {snake(key): _renamed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item) for item in value]
    return value


def rule_name(resource_type: str, name: str) -> str:
    """A field of the resource in the rules' name: ``num_gpus`` for the plugin's ``numGpus``."""
    return snake(name) if resource_type in _NATIVE_TYPES else name


def field_label(resource_type: str, name: str) -> str:
    """A field as the program that declares the resource writes it: ``numGpus`` for the plugin's types."""
    return camel(name) if resource_type in _NATIVE_TYPES else name


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
                inputs=in_rule_names(raw["type"], raw.get("inputs") or {}),
                outputs=in_rule_names(raw["type"], raw.get("outputs") or {}),
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
