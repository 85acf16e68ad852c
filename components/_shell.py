"""The shell every component shares: guard the rendered objects, then create them as children."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from . import guard, kube
from .platform import DEFAULT_PREEMPTIBLE_TAINT, Taint

TYPE_PREFIX = "together:components"


class ManifestComponent(pulumi.ComponentResource):
    """A component made of rendered Kubernetes objects, refused before registration if the guard objects.

    Children are parented to the component, so they inherit the Kubernetes provider given in ``opts``.
    """

    resources: dict[str, pulumi.CustomResource]
    """The children, keyed by ``Kind/name`` of the object each one creates."""

    def __init__(
        self,
        type_name: str,
        name: str,
        manifests: Sequence[Mapping[str, Any]],
        opts: pulumi.ResourceOptions | None,
        taint: Taint | None = DEFAULT_PREEMPTIBLE_TAINT,
    ) -> None:
        # Before registering anything, so a refused layout leaves nothing half-declared in the plan.
        guard.enforce(f"{type_name} {name!r}", manifests, taint)
        super().__init__(f"{TYPE_PREFIX}:{type_name}", name, None, opts)
        self.manifests = [dict(m) for m in manifests]
        child_opts = pulumi.ResourceOptions(parent=self)
        self.resources = {}
        for manifest in self.manifests:
            key = f"{manifest['kind']}/{manifest['metadata']['name']}"
            resource_name = f"{name}-{manifest['kind'].lower()}-{manifest['metadata']['name']}"
            self.resources[key] = kube.create(resource_name, manifest, child_opts)
        self.names = pulumi.Output.from_input(sorted(self.resources))

    def finish(self, outputs: Mapping[str, Any]) -> None:
        """Register the component's outputs (always includes the names of the objects it created)."""
        self.register_outputs({"names": self.names, **outputs})
