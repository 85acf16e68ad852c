"""The floor of engine overhead: a dynamic resource whose provider does nothing at all.

The benchmark's no-op stack declares as many of these as the cluster stack declares clusters, with the
same inputs, so the difference between the two is what our provider costs (API calls, waits, imports).
Pickled by reference as ``tests.bench.noop_provider.NoopProvider``: the engine runs with the repository
root on PYTHONPATH.
"""

from __future__ import annotations

import uuid
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult


class NoopProvider(ResourceProvider):
    """Creates nothing, reads back what it was given, reports a change only when the inputs differ."""

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(id_=uuid.uuid4().hex, outs=props)

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        changed = {k: v for k, v in news.items() if olds.get(k) != v}
        return DiffResult(changes=bool(changed))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=news)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_=id_, outs=props)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        return None


class NoopResource(Resource):
    """A resource of :class:`NoopProvider` with arbitrary inputs."""

    def __init__(self, name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(NoopProvider(), name, props, opts)
