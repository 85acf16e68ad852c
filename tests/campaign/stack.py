"""The Pulumi engine's steps for ``Cluster`` resources, taken in-process against the dynamic provider.

For each resource the engine calls ``check(old inputs, new inputs)``, ``diff(id, old outputs, checked
inputs)`` and then ``create`` / ``update`` / ``delete`` (a replacement with ``delete_before_replace``
deletes first), ``read`` on refresh. What it records follows the engine: a failed create records
nothing, a failed update or delete keeps the previous state, a read that finds nothing drops the
resource. The real engine runs the same provider in tests/campaign/test_engine_campaign.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from together_clusters.provider.resource import ClusterProvider


class CheckFailed(Exception):
    """The provider's check refused the inputs (the engine stops at preview)."""


@dataclass
class Recorded:
    """One resource in the stack's state: its id, checked inputs and outputs."""

    id: str
    inputs: dict[str, Any]
    outs: dict[str, Any]


@dataclass
class Stack:
    """The state of a stack of Cluster resources, by resource name."""

    resources: dict[str, Recorded] = field(default_factory=dict)
    provider: ClusterProvider = field(default_factory=ClusterProvider)

    def up(self, name: str, code: dict[str, Any]) -> str:
        """Make resource ``name`` match ``code``; returns what the engine did (raises what failed)."""
        current = self.resources.get(name)
        checked = self.provider.check(current.inputs if current else {}, code)
        if checked.failures:
            raise CheckFailed("; ".join(f"{f.property}: {f.reason}" for f in checked.failures))
        inputs = checked.inputs
        if current is None:
            made = self.provider.create(inputs)
            self.resources[name] = Recorded(made.id, inputs, made.outs)
            return "create"
        plan = self.provider.diff(current.id, current.outs, inputs)
        if not plan.changes:
            return "same"
        if plan.replaces:
            if plan.delete_before_replace:
                self.provider.delete(current.id, current.outs)
                del self.resources[name]
                made = self.provider.create(inputs)
                self.resources[name] = Recorded(made.id, inputs, made.outs)
            else:
                made = self.provider.create(inputs)
                self.resources[name] = Recorded(made.id, inputs, made.outs)
                self.provider.delete(current.id, current.outs)
            return "replace"
        updated = self.provider.update(current.id, current.outs, inputs)
        self.resources[name] = Recorded(current.id, inputs, updated.outs or current.outs)
        return "update"

    def refresh(self, name: str) -> str:
        current = self.resources[name]
        read = self.provider.read(current.id, current.outs)
        if not read.id:
            del self.resources[name]
            return "gone"
        self.resources[name] = Recorded(read.id, read.inputs or current.inputs, read.outs or current.outs)
        return "refresh"

    def destroy(self, name: str) -> str:
        current = self.resources[name]
        self.provider.delete(current.id, current.outs)
        del self.resources[name]
        return "delete"
